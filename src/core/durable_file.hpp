// Small files that must survive a crash whole (the static slots' state file, the history of
// what an instance was granted).  Pure C++: no PostgreSQL headers.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

namespace cosid {

enum class ReadStatus { Ok, Missing, Unreadable };
// Reads the whole file into *text.  Missing when it does not exist; Unreadable when it cannot
// be read, is a directory or is larger than max_bytes; *message says which, without the path.
ReadStatus read_small_file(const std::string& path, size_t max_bytes, std::string* text, std::string* message);
// Writes path + ".tmp", fsyncs it, renames it over path and fsyncs the directory, so that a
// crash leaves either the old or the new file.  Nothing when all of it succeeded; else a
// message naming the step, the file and strerror, the temporary file removed.
std::optional<std::string> write_file_durably(const std::string& path, const std::string& text);

}  // namespace cosid
