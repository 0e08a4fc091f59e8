// Small files that must survive a crash whole: read bounded, written through a temporary
// file, fsync and rename, then fsync of the directory.  Pure C++: no PostgreSQL headers.
#include "durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cosid {

ReadStatus read_small_file(const std::string& path, size_t max_bytes, std::string* text, std::string* message) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        *message = "it does not exist";
        return ReadStatus::Missing;
    }
    auto failed = [](const char* step) { return std::string("could not ") + step + " it: " + std::strerror(errno); };
    auto unreadable = [fd, message](const std::string& m) {
        if (fd >= 0) close(fd);
        *message = m;
        return ReadStatus::Unreadable;
    };
    if (fd < 0) return unreadable(failed("open"));
    struct stat st;
    if (fstat(fd, &st) != 0) return unreadable(failed("stat"));
    if (S_ISDIR(st.st_mode)) return unreadable("it is a directory, not a file");
    text->clear();
    char buf[65536];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return unreadable(failed("read"));
        text->append(buf, static_cast<size_t>(n));
        if (text->size() > max_bytes) return unreadable("it is larger than 1 MiB, far more than cosid writes");
    }
    close(fd);
    return ReadStatus::Ok;
}

std::optional<std::string> write_file_durably(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp";
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    int fd = -1;
    bool tmp_exists = false;
    auto fail = [&](const std::string& step, const std::string& file) -> std::optional<std::string> {
        const std::string m = "could not " + step + " \"" + file + "\": " + std::strerror(errno);
        if (fd >= 0) close(fd);
        if (tmp_exists) unlink(tmp.c_str());
        return m;
    };
    fd = open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return fail("create", tmp);
    tmp_exists = true;
    for (size_t done = 0; done < text.size();) {
        const ssize_t n = write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = ENOSPC;  // a write of 0 bytes makes no progress: report it as full
            return fail("write", tmp);
        }
        done += static_cast<size_t>(n);
    }
    if (fsync(fd) != 0) return fail("fsync", tmp);
    const int closed = close(fd);
    fd = -1;
    if (closed != 0) return fail("close", tmp);
    if (rename(tmp.c_str(), path.c_str()) != 0) return fail("rename", tmp + "\" to \"" + path);
    tmp_exists = false;
    fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return fail("open directory", dir);
    if (fsync(fd) != 0) return fail("fsync directory", dir);
    close(fd);
    return std::nullopt;
}

}  // namespace cosid

// The core is compiled without PostgreSQL so GoogleTest can test it directly.
#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif
