#include "dsn_scrub.hpp"

#include <algorithm>
#include <cstring>

namespace cosid {

namespace {

constexpr const char* kHidden = "********";
constexpr size_t kMinPiece = 3;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_word(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool is_delimiter(char c) { return is_space(c) || std::strchr("'\"/:@?&=,[]#%\\", c) != nullptr; }

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// %XX decoded where it is valid, anything else kept as it is.
std::string percent_decode(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
            out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

// Backslash escapes of keyword form removed: "\x" is "x".
std::string unescape(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) ++i;
        out += s[i];
    }
    return out;
}

std::string trim_right(std::string s) {
    while (!s.empty() && is_space(s.back())) s.pop_back();
    return s;
}

void add_region(std::vector<std::string>* out, const std::string& raw) {
    if (raw.empty()) return;
    const std::string forms[] = {raw, unescape(raw), percent_decode(raw), percent_decode(unescape(raw))};
    for (const std::string& f : forms) {
        if (f.empty()) continue;
        out->push_back(f);
        size_t start = 0;
        for (size_t i = 0; i <= f.size(); ++i) {
            if (i == f.size() || is_delimiter(f[i])) {
                if (i - start >= kMinPiece) out->push_back(f.substr(start, i - start));
                start = i + 1;
            }
        }
    }
}

// The next `word=` of keyword form after a run of whitespace, from `from` on: where an
// unquoted value ends (npos: at the end).
size_t next_keyword(const std::string& dsn, size_t from) {
    for (size_t i = from; i < dsn.size(); ++i) {
        if (!is_space(dsn[i])) continue;
        size_t j = i;
        while (j < dsn.size() && is_space(dsn[j])) ++j;
        size_t w = j;
        while (j < dsn.size() && is_word(dsn[j])) ++j;
        if (j == w) continue;
        while (j < dsn.size() && is_space(dsn[j])) ++j;
        if (j < dsn.size() && dsn[j] == '=') return i;
    }
    return std::string::npos;
}

// Values of every keyword whose name ends in "password" (any case), followed by `=`.
void keyword_values(const std::string& dsn, std::vector<std::string>* out) {
    static const char kKey[] = "password";
    const size_t klen = sizeof(kKey) - 1;
    for (size_t k = 0; k + klen <= dsn.size(); ++k) {
        size_t m = 0;
        while (m < klen && lower(dsn[k + m]) == kKey[m]) ++m;
        if (m < klen) continue;
        size_t i = k + klen;
        while (i < dsn.size() && is_space(dsn[i])) ++i;
        if (i >= dsn.size() || dsn[i] != '=') continue;
        ++i;
        size_t key_start = k;
        while (key_start > 0 && is_word(dsn[key_start - 1])) --key_start;
        bool in_query = key_start > 0 && (dsn[key_start - 1] == '?' || dsn[key_start - 1] == '&');
        if (in_query) {  // a URI's query: up to the next parameter
            size_t end = dsn.find('&', i);
            add_region(out, dsn.substr(i, end == std::string::npos ? std::string::npos : end - i));
            continue;
        }
        while (i < dsn.size() && is_space(dsn[i])) ++i;
        if (i < dsn.size() && dsn[i] == '\'') {  // quoted: to the closing quote, or the end
            size_t j = i + 1;
            while (j < dsn.size() && dsn[j] != '\'') j += dsn[j] == '\\' ? 2 : 1;
            add_region(out, dsn.substr(i + 1, std::min(j, dsn.size()) - (i + 1)));
            continue;
        }
        size_t end = next_keyword(dsn, i);
        add_region(out, trim_right(dsn.substr(i, end == std::string::npos ? std::string::npos : end - i)));
    }
}

// The password of every URI's user information: "scheme://user:password@hosts".
void uri_passwords(const std::string& dsn, std::vector<std::string>* out) {
    for (size_t p = dsn.find("://"); p != std::string::npos; p = dsn.find("://", p + 3)) {
        size_t start = p + 3;
        size_t end = start;
        while (end < dsn.size() && !is_space(dsn[end])) ++end;
        std::string uri = dsn.substr(start, end - start);
        size_t at = uri.rfind('@');
        if (at == std::string::npos) continue;
        size_t colon = uri.find(':');
        if (colon == std::string::npos || colon > at) continue;
        add_region(out, uri.substr(colon + 1, at - colon - 1));
    }
}

}  // namespace

std::vector<std::string> dsn_secrets(const std::string& dsn) {
    std::vector<std::string> out;
    keyword_values(dsn, &out);
    uri_passwords(dsn, &out);
    std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
        return a.size() != b.size() ? a.size() > b.size() : a < b;
    });
    out.erase(std::unique(out.begin(), out.end()), out.end());
    out.erase(std::remove(out.begin(), out.end(), std::string()), out.end());
    return out;
}

std::string scrub_secrets(const std::string& message, const std::vector<std::string>& secrets) {
    std::string s = message;
    for (const std::string& secret : secrets) {
        if (secret.empty()) continue;
        std::string out;
        size_t from = 0;
        for (size_t at = s.find(secret); at != std::string::npos; at = s.find(secret, from)) {
            out.append(s, from, at - from);
            out += kHidden;
            from = at + secret.size();
        }
        out.append(s, from, std::string::npos);
        s.swap(out);
    }
    return s;
}

std::string scrub_dsn_secrets(const std::string& message, const std::string& dsn) {
    return scrub_secrets(message, dsn_secrets(dsn));
}

}  // namespace cosid

// The core is compiled without PostgreSQL so GoogleTest can test it directly.
#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif
