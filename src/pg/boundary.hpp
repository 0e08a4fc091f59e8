// The one place where C++ meets PostgreSQL's error handling.
//
// Two rules, both enforced here:
//  * no C++ exception may unwind through a PostgreSQL frame: cpp_call() runs C++ code and
//    turns any exception into an ereport(ERROR) after the C++ frame is gone;
//  * no ereport(ERROR) may longjmp over a C++ object with a destructor: code that can
//    ereport keeps only trivially destructible locals (checked with static_asserts where
//    state is kept), and every C++ object that owns memory lives inside a cpp_call lambda.
#pragma once
#include "pg.hpp"

#include <exception>
#include <type_traits>
#include <utility>

namespace cosid::pg {

template <typename F>
auto cpp_call(F&& f) -> decltype(f()) {
    using R = decltype(f());
    static_assert(std::is_void_v<R> || std::is_trivially_destructible_v<R>,
                  "values crossing into PostgreSQL frames must be trivially destructible");
    char message[256];
    message[0] = '\0';
    try {
        return f();
    } catch (const std::exception& e) {
        strlcpy(message, e.what(), sizeof(message));
    } catch (...) {
        strlcpy(message, "unknown C++ exception", sizeof(message));
    }
    ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("cosid internal error: %s", message)));
    pg_unreachable();
}

}  // namespace cosid::pg
