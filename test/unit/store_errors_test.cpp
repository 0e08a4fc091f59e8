#include <gtest/gtest.h>

#include "store_errors.hpp"

using cosid::store_error_is_transient;

TEST(StoreErrors, TransientWhenATryAgainMaySucceed) {
    for (const char* s : {"08000", "08003", "08006", "08001", "08004", "08P01",  // connection
                          "40001", "40P01", "55P03", "57014",                    // races, timeouts
                          "57P01", "57P02", "57P03",                             // server going
                          "53000", "53100", "53200", "53300", "53400",           // resources
                          "58000", "58030", "25006"})                            // i/o, failover
        EXPECT_TRUE(store_error_is_transient(s)) << s;
}

TEST(StoreErrors, PermanentOtherwise) {
    for (const char* s : {"XX000", "XX001", "42704", "42P17", "42501", "42883", "22023", "22003",
                          "23505", "23502", "P0001", "ZC003", "40002", "40003", "55006", "57P04",
                          "58P01", "25001", "00000", "0A000", "54000"})
        EXPECT_FALSE(store_error_is_transient(s)) << s;
}

TEST(StoreErrors, MalformedIsPermanent) {
    EXPECT_FALSE(store_error_is_transient(nullptr));
    EXPECT_FALSE(store_error_is_transient(""));
    EXPECT_FALSE(store_error_is_transient("08"));
    EXPECT_FALSE(store_error_is_transient("400010"));
    EXPECT_FALSE(store_error_is_transient("40p01"));  // SQLSTATEs are upper case
}
