// Keeping the password of a connection string (cosid.store_dsn) out of every message.
//
// libpq echoes parts of a connection string it cannot parse ("end of string reached when
// looking for matching "]" in IPv6 host address in URI: "postgresql://u:pw@[::1/db"",
// "invalid percent-encoded token: "pw%zz"", "missing "=" after "Secret" in connection info
// string"), and a store error may quote anything.  The rule, whatever the string's shape,
// well-formed or not:
//
// * the secret regions of the DSN are the value of every `password` or `sslpassword` keyword
//   (any case, in keyword form or in a URI's query; quoted with backslash escapes, where an
//   unterminated quote runs to the end; unquoted up to the next `word=` of keyword form, or
//   to `&` in a URI's query, so that a value with spaces counts whole), and the password of
//   every URI's user information (`scheme://user:password@`, up to the last `@` before the
//   hosts' end, so an unencoded `/`, `@` or `:` in it counts too);
// * each region is hidden in a message as written, unescaped and percent-decoded, and so is
//   every piece of it of 3 characters or more that libpq may cut from it at a delimiter
//   (whitespace, quotes, `/ : @ ? & = , [ ] #`, and `%` of a bad percent-encoding).
//
// A message is scrubbed before it is truncated to any buffer: a cut through a password would
// leave its beginning unmatched.
#pragma once
#include <string>
#include <vector>

namespace cosid {

// The texts to hide for `dsn`, longest first, none empty.
std::vector<std::string> dsn_secrets(const std::string& dsn);

// `message` with every occurrence of each of `secrets` (dsn_secrets) replaced by "********".
std::string scrub_secrets(const std::string& message, const std::vector<std::string>& secrets);

// Both: `message` with every secret of `dsn` hidden.
std::string scrub_dsn_secrets(const std::string& message, const std::string& dsn);

}  // namespace cosid
