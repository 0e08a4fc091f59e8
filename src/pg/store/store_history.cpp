// The keeper's side of cosid.history: loaded once, kept in the keeper's memory, written
// (temporary file, fsync, rename, fsync of the directory) whenever a grant raises a ceiling.
// Only the keeper process uses it, one call at a time.  Every C++ object lives inside
// cpp_call; the callers ereport after it returned.
#include "store_history.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "../boundary.hpp"
#include "durable_file.hpp"
#include "fork_rule.hpp"

namespace cosid::pg {

namespace {
std::vector<cosid::GrantedNamespace>* history = nullptr;  // loaded: not null
std::vector<cosid::ForkSeen>* forks = nullptr;            // loaded with it: the forks this data directory is a copy in
uint32 local_timeline = 0;  // the timeline this data directory last issued from a local store on
char load_error[256] = "";

std::string history_path() { return std::string(DataDir) + "/cosid.history"; }

// False with the reason when the file exists and cannot be used.
bool loaded(char* message, size_t size) {
    if (history != nullptr) return true;
    bool ok = cpp_call([&] {
        std::string text, why;
        auto* h = new std::vector<cosid::GrantedNamespace>();
        auto* f = new std::vector<cosid::ForkSeen>();
        switch (cosid::read_small_file(history_path(), size_t{1} << 20, &text, &why)) {
        case cosid::ReadStatus::Missing:
            history = h;
            forks = f;
            return true;
        case cosid::ReadStatus::Unreadable: break;
        case cosid::ReadStatus::Ok:
            if (auto bad = cosid::parse_history(text, h, &local_timeline, f))
                why = *bad;
            else {
                history = h;
                forks = f;
                return true;
            }
        }
        delete h;
        delete f;
        snprintf(load_error, sizeof(load_error), "cosid.history in the data directory cannot be used: %s", why.c_str());
        return false;
    });
    if (!ok) strlcpy(message, load_error, size);
    return ok;
}
}  // namespace

bool history_floor(const char* ns, const char* store_id, const cosid::Layout& layout, int32 slot, int64* floor_ms,
                   char* message, size_t message_size) {
    if (!loaded(message, message_size)) return false;
    *floor_ms = cpp_call([&] {
        for (const cosid::GrantedNamespace& g : *history)
            if (g.ns == ns) return cosid::floor_after_store_change(&g, store_id, layout, slot);
        return int64_t{0};
    });
    return true;
}

bool history_record(const char* ns, const char* store_id, const cosid::Layout& layout, int32 slot, int64 ceiling_ms,
                    bool local_store, char* message, size_t message_size) {
    if (!loaded(message, message_size)) return false;
    char failed[256] = "";
    uint32 timeline = local_store ? GetWALInsertionTimeLine() : local_timeline;
    cpp_call([&] {
        std::vector<cosid::GrantedNamespace> next = *history;
        cosid::GrantedNamespace* g = nullptr;
        for (cosid::GrantedNamespace& x : next)
            if (x.ns == ns) g = &x;
        if (g == nullptr) {
            next.push_back(cosid::GrantedNamespace{});
            g = &next.back();
            g->ns = ns;
            g->layout = layout;
        }
        if (!cosid::record_grant(g, store_id, layout, slot, ceiling_ms) && timeline == local_timeline) return;
        if (auto bad = cosid::write_file_durably(history_path(), cosid::serialize_history(next, timeline, *forks))) {
            strlcpy(failed, bad->c_str(), sizeof(failed));
            return;
        }
        *history = std::move(next);
        local_timeline = timeline;
    });
    if (failed[0] != '\0') {
        snprintf(message, message_size, "cosid.history could not be written: %s", failed);
        return false;
    }
    return true;
}

void history_released(const char* ns, const char* store_id, int32 slot, int64 last_ms) {
    char message[256];
    if (store_id[0] == '\0' || !loaded(message, sizeof(message))) return;
    char failed[256] = "";
    cpp_call([&] {
        std::vector<cosid::GrantedNamespace> next = *history;
        bool changed = false;
        for (cosid::GrantedNamespace& g : next)
            if (g.ns == ns) changed = cosid::record_release(&g, store_id, slot, last_ms);
        if (!changed) return;
        if (auto bad =
                cosid::write_file_durably(history_path(), cosid::serialize_history(next, local_timeline, *forks)))
            strlcpy(failed, bad->c_str(), sizeof(failed));
        else
            *history = std::move(next);
    });
    if (failed[0] != '\0') ereport(LOG, (errmsg("cosid: cosid.history could not be written: %s", failed)));
}

bool history_issued_on_timeline(uint32* timeline) {
    char message[256];
    if (!loaded(message, sizeof(message))) return false;
    *timeline = local_timeline;
    return true;
}

bool history_set_timeline(uint32 timeline, char* message, size_t message_size) {
    if (!loaded(message, message_size)) return false;
    char failed[256] = "";
    cpp_call([&] {
        if (auto bad = cosid::write_file_durably(history_path(), cosid::serialize_history(*history, timeline, *forks)))
            strlcpy(failed, bad->c_str(), sizeof(failed));
        else
            local_timeline = timeline;
    });
    if (failed[0] != '\0') {
        snprintf(message, message_size, "cosid.history could not be written: %s", failed);
        return false;
    }
    return true;
}

bool history_add_fork(const char* id, const char* reason, char* message, size_t message_size) {
    if (!loaded(message, message_size)) return false;
    char failed[256] = "";
    cpp_call([&] {
        for (const cosid::ForkSeen& f : *forks)
            if (f.id == id) return;
        std::vector<cosid::ForkSeen> next = *forks;
        next.push_back(cosid::ForkSeen{id, cosid::fork_reason_line(reason)});
        if (auto bad =
                cosid::write_file_durably(history_path(), cosid::serialize_history(*history, local_timeline, next)))
            strlcpy(failed, bad->c_str(), sizeof(failed));
        else
            *forks = std::move(next);
    });
    if (failed[0] != '\0') {
        snprintf(message, message_size, "cosid.history could not be written: %s", failed);
        return false;
    }
    return true;
}

char* history_forks_text(char* message, size_t message_size) {
    if (!loaded(message, message_size)) return nullptr;
    size_t len = 0;
    cpp_call([&] {
        for (const cosid::ForkSeen& f : *forks) len += f.id.size() + f.reason.size() + 2;
    });
    char* out = static_cast<char*>(palloc(len + 1));  // (outside cpp_call: palloc may ereport)
    out[0] = '\0';
    cpp_call([&] {
        std::string text;
        for (const cosid::ForkSeen& f : *forks) text += f.id + "\t" + f.reason + "\n";
        memcpy(out, text.c_str(), std::min(text.size(), len) + 1);
        out[std::min(text.size(), len)] = '\0';
    });
    return out;
}

}  // namespace cosid::pg
