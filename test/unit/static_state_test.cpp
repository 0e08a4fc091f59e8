#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <vector>

#include "issue_word.hpp"
#include "static_state.hpp"

using namespace cosid;

namespace {

StaticSlots slots_ok(const std::string& text) {
    StaticSlots s;
    const auto err = parse_static_slots(text, &s);
    EXPECT_FALSE(err) << text << ": " << *err;
    return s;
}

std::string slots_error(const std::string& text) {
    StaticSlots s;
    s.any = 42;  // must be left alone on an error
    const auto err = parse_static_slots(text, &s);
    EXPECT_TRUE(err) << text;
    EXPECT_EQ(s.any, 42) << text;
    return err ? *err : "";
}

int64_t ts_ok(const std::string& text) {
    int64_t ms = -1;
    const auto err = parse_timestamp_ms(text, &ms);
    EXPECT_FALSE(err) << text << ": " << *err;
    return ms;
}

std::string ts_error(const std::string& text) {
    int64_t ms = 12345;
    const auto err = parse_timestamp_ms(text, &ms);
    EXPECT_TRUE(err) << text;
    EXPECT_EQ(ms, 12345) << text;
    return err ? *err : "";
}

StateFile sample() {
    StateFile f;
    f.system_identifier = 7312345678901234567ULL;
    f.set_window("orders", 7, 1733250000123, 1);
    f.set_window("a:b.c-d_9", 65535, 0, 4294967295u);
    f.set_window("orders", 3, 9223372036854775807LL, 2);
    f.raise_not_before("orders", 1733250000000);
    f.raise_not_before("x:y:z", 0);
    return f;
}

void expect_same(const StateFile& a, const StateFile& b) {
    EXPECT_EQ(a.system_identifier, b.system_identifier);
    ASSERT_EQ(a.windows.size(), b.windows.size());
    for (size_t i = 0; i < a.windows.size(); ++i) {
        EXPECT_EQ(a.windows[i].ns, b.windows[i].ns);
        EXPECT_EQ(a.windows[i].slot, b.windows[i].slot);
        EXPECT_EQ(a.windows[i].ceiling_ms, b.windows[i].ceiling_ms);
        EXPECT_EQ(a.windows[i].timeline, b.windows[i].timeline);
    }
    ASSERT_EQ(a.not_before.size(), b.not_before.size());
    for (size_t i = 0; i < a.not_before.size(); ++i) {
        EXPECT_EQ(a.not_before[i].ns, b.not_before[i].ns);
        EXPECT_EQ(a.not_before[i].ms, b.not_before[i].ms);
    }
}

// A body with its checksum line appended, so that only the body's content is under test.
std::string with_crc(const std::string& body) {
    char crc[32];
    std::snprintf(crc, sizeof crc, "crc32c %08x\n", static_cast<unsigned>(crc32c(body)));
    return body + crc;
}

const std::string kHead = "cosid_state_version 1\nsystem_identifier 1\n";

LoadResult parse_body(const std::string& body) { return parse_state(with_crc(body)); }

std::string make_temp_dir() {
    char templ[] = "/tmp/cosid_state_test.XXXXXX";
    const char* d = mkdtemp(templ);
    EXPECT_NE(d, nullptr);
    return d ? d : "/nonexistent";
}

bool exists(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

}  // namespace

TEST(StaticSlots, Valid) {
    StaticSlots s = slots_ok("7");
    EXPECT_EQ(s.any, 7);
    EXPECT_TRUE(s.named.empty());
    EXPECT_EQ(s.slot_for("anything"), 7);

    s = slots_ok("orders:7, default:3");
    EXPECT_FALSE(s.any);
    ASSERT_EQ(s.named.size(), 2u);
    EXPECT_EQ(s.slot_for("orders"), 7);
    EXPECT_EQ(s.slot_for("default"), 3);
    EXPECT_FALSE(s.slot_for("other"));

    s = slots_ok("5, orders:7");
    EXPECT_EQ(s.slot_for("orders"), 7);
    EXPECT_EQ(s.slot_for("other"), 5);

    s = slots_ok("  orders : 7 ,\t0 , a:b.c-d_e : 65535  ");
    EXPECT_EQ(s.slot_for("orders"), 7);
    EXPECT_EQ(s.slot_for("a:b.c-d_e"), 65535);  // split at the last ':'
    EXPECT_EQ(s.slot_for("a"), 0);
    EXPECT_EQ(slots_ok("ns:007").slot_for("ns"), 7);
    EXPECT_EQ(slots_ok(std::string(63, 'n') + ":1").slot_for(std::string(63, 'n')), 1);
}

TEST(StaticSlots, BlankIsEmpty) {
    for (const char* t : {"", "   ", "\t"}) {
        StaticSlots s;
        s.any = 1;
        EXPECT_FALSE(parse_static_slots(t, &s)) << t;
        EXPECT_TRUE(s.empty()) << t;
        EXPECT_FALSE(s.slot_for("orders"));
    }
    EXPECT_FALSE(slots_ok("1").empty());
    EXPECT_FALSE(slots_ok("a:1").empty());
}

TEST(StaticSlots, Errors) {
    EXPECT_NE(slots_error("x").find("\"x\""), std::string::npos);
    EXPECT_NE(slots_error("orders:x").find("orders:x"), std::string::npos);
    EXPECT_NE(slots_error("orders:").find("orders:"), std::string::npos);
    slots_error("-1");
    slots_error("+1");
    slots_error("7 8");
    slots_error("0x10");
    EXPECT_NE(slots_error("65536").find("out of range"), std::string::npos);
    EXPECT_NE(slots_error("a:99999999999999999999999").find("out of range"), std::string::npos);
    EXPECT_NE(slots_error(":7").find("namespace name"), std::string::npos);
    EXPECT_NE(slots_error("bad name!:7").find("bad name!"), std::string::npos);
    slots_error("a b:7");
    slots_error(std::string(64, 'n') + ":1");
    EXPECT_NE(slots_error("orders:1, orders : 2").find("twice"), std::string::npos);
    EXPECT_NE(slots_error("5, orders:1, 6").find("\"6\""), std::string::npos);
    for (const char* t : {"7,,orders:3", "7,", ",7", "7, ,3", ","})
        EXPECT_NE(slots_error(t).find("empty"), std::string::npos) << t;
}

TEST(Timestamp, ZoneAndOffsets) {
    const int64_t y2024 = 1704067200000LL;
    EXPECT_EQ(ts_ok("2024-01-01 00:00Z"), y2024);
    EXPECT_EQ(ts_ok("2024-01-01T00:00:00z"), y2024);
    EXPECT_EQ(ts_ok("  2024-01-01t00:00:00Z "), y2024);
    EXPECT_EQ(ts_ok("2024-01-01 01:00+01"), y2024);
    EXPECT_EQ(ts_ok("2024-01-01 01:30+01:30"), y2024);
    EXPECT_EQ(ts_ok("2024-01-01T01:30:00+0130"), y2024);
    EXPECT_EQ(ts_ok("2023-12-31 19:00-05:00"), y2024);
    EXPECT_EQ(ts_ok("2024-01-01 00:00+00"), y2024);
    EXPECT_EQ(ts_ok("1970-01-01 00:00Z"), 0);
    EXPECT_EQ(ts_ok("2026-12-03 07:20:17.816Z"), 1796282417816LL);
    EXPECT_EQ(ts_ok("9999-12-31T23:59:59.999Z"), 253402300799999LL);
    EXPECT_EQ(ts_ok(""), 0);
    EXPECT_EQ(ts_ok("  "), 0);
}

TEST(Timestamp, FractionTruncatedToMs) {
    const int64_t base = 1796282417000LL;  // 2026-12-03 07:20:17Z
    EXPECT_EQ(ts_ok("2026-12-03 07:20:17.5Z"), base + 500);
    EXPECT_EQ(ts_ok("2026-12-03 07:20:17.05Z"), base + 50);
    EXPECT_EQ(ts_ok("2026-12-03 07:20:17.8169Z"), base + 816);
    EXPECT_EQ(ts_ok("2026-12-03 07:20:17.999999999Z"), base + 999);
    ts_error("2026-12-03 07:20:17.1234567890Z");
    ts_error("2026-12-03 07:20:17.Z");
    ts_error("2026-12-03 07:20.5Z");  // a fraction only after seconds
}

TEST(Timestamp, Calendar) {
    EXPECT_EQ(ts_ok("2024-02-29 00:00Z"), 1709164800000LL);
    EXPECT_EQ(ts_ok("2000-02-29 00:00Z") + 86400000, ts_ok("2000-03-01 00:00Z"));
    EXPECT_NE(ts_error("2026-02-29 00:00Z").find("day"), std::string::npos);
    ts_error("2100-02-29 00:00Z");
    ts_error("2026-04-31 00:00Z");
    ts_error("2026-00-10 00:00Z");
    ts_error("2026-13-10 00:00Z");
    ts_error("2026-01-00 00:00Z");
    ts_error("2026-01-01 24:00Z");
    ts_error("2026-01-01 23:60Z");
    ts_error("2026-01-01 23:59:60Z");
    ts_error("1969-12-31 23:59Z");
    ts_error("1970-01-01 00:30+01:00");  // before 1970 once the offset is applied
    ts_error("10000-01-01 00:00Z");
    ts_error("2026-01-01 00:00+24");
    ts_error("2026-01-01 00:00+01:60");
}

TEST(Timestamp, ZoneRequiredAndGarbage) {
    EXPECT_NE(ts_error("2026-12-03 07:20:17").find("zone"), std::string::npos);
    ts_error("2026-12-03 07:20");
    for (const char* t : {"now", "2026-12-03", "2026-12-03 07", "2026-1-03 07:20Z", "2026-12-03 7:20Z",
                          "2026-12-03  07:20Z", "2026-12-03 07:20 Z", "2026-12-03 07:20UTC", "2026-12-03 07:20+1",
                          "2026-12-03 07:20+01:", "2026-12-03 07:20+01:0", "2026-12-03 07:20Zx",
                          "2026-12-03 07:20+01:00x", "2026/12/03 07:20Z", "1733250000000"})
        ts_error(t);
}

TEST(Timestamp, Format) {
    EXPECT_EQ(format_timestamp_ms(1796282417816LL), "2026-12-03 07:20:17.816Z");
    EXPECT_EQ(format_timestamp_ms(0), "1970-01-01 00:00:00.000Z");
    EXPECT_EQ(format_timestamp_ms(1709164800000LL), "2024-02-29 00:00:00.000Z");
    EXPECT_EQ(format_timestamp_ms(-1), "1969-12-31 23:59:59.999Z");
    for (int64_t ms : {0LL, 951782400000LL, 1709164800001LL, 1796282417816LL, 253402300799999LL})
        EXPECT_EQ(ts_ok(format_timestamp_ms(ms)), ms);
}

TEST(StateFile, Crc32cVector) {
    EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
    EXPECT_EQ(crc32c(""), 0u);
}

TEST(StateFile, Accessors) {
    StateFile f;
    EXPECT_EQ(f.find_window("orders", 7), nullptr);
    f.set_window("orders", 7, 100, 1);
    f.set_window("orders", 7, 200, 2);  // replaces
    ASSERT_EQ(f.windows.size(), 1u);
    EXPECT_EQ(f.find_window("orders", 7)->ceiling_ms, 200);
    EXPECT_EQ(f.find_window("orders", 7)->timeline, 2u);
    EXPECT_EQ(f.find_window("orders", 8), nullptr);
    EXPECT_EQ(f.not_before_of("orders"), 0);
    f.raise_not_before("orders", 50);
    f.raise_not_before("orders", 40);
    EXPECT_EQ(f.not_before_of("orders"), 50);
    f.raise_not_before("orders", 60);
    EXPECT_EQ(f.not_before_of("orders"), 60);
    EXPECT_EQ(f.not_before.size(), 1u);
}

TEST(StateFile, RoundTrip) {
    const StateFile f = sample();
    const std::string text = serialize_state(f);
    EXPECT_EQ(text.compare(0, 2, "# "), 0);
    EXPECT_NE(text.find("\nwindow orders 7 1733250000123 1\n"), std::string::npos);
    const LoadResult r = parse_state(text);
    ASSERT_EQ(r.status, LoadStatus::Ok) << r.message;
    expect_same(f, r.file);
    EXPECT_EQ(serialize_state(r.file), text);

    const LoadResult empty = parse_state(serialize_state(StateFile{}));
    ASSERT_EQ(empty.status, LoadStatus::Ok) << empty.message;
    expect_same(StateFile{}, empty.file);
}

TEST(StateFile, EveryFlippedByteIsCaught) {
    const std::string text = serialize_state(sample());
    std::string bad = text;
    const size_t at = text.find("1733250000123");
    bad[at] = '2';
    const LoadResult r = parse_state(bad);
    EXPECT_EQ(r.status, LoadStatus::Corrupt);
    EXPECT_EQ(r.message, "the checksum does not match: the file was changed or cut short");
    for (size_t i = 0; i < text.size(); ++i) {
        bad = text;
        bad[i] = static_cast<char>(bad[i] ^ 0x01);
        EXPECT_NE(parse_state(bad).status, LoadStatus::Ok) << i;
    }
}

TEST(StateFile, EveryTruncationIsCorrupt) {
    const std::string text = serialize_state(sample());
    for (size_t n = 0; n < text.size(); ++n) {
        const LoadResult r = parse_state(text.substr(0, n));
        EXPECT_EQ(r.status, LoadStatus::Corrupt) << n;
        EXPECT_FALSE(r.message.empty()) << n;
    }
    EXPECT_EQ(parse_state(text.substr(0, text.size() - 1)).message, "it ends before its checksum line (truncated)");
}

TEST(StateFile, FutureVersion) {
    LoadResult r = parse_state("# comment\ncosid_state_version 2\nsomething we cannot read\n");
    EXPECT_EQ(r.status, LoadStatus::FutureVersion);
    EXPECT_EQ(r.message, "it was written by a newer cosid (state version 2; this one reads 1)");
    EXPECT_EQ(parse_state("cosid_state_version 17\n").status, LoadStatus::FutureVersion);
    EXPECT_EQ(parse_state("cosid_state_version 2").status, LoadStatus::Corrupt);  // line not complete
    EXPECT_EQ(parse_state("cosid_state_version 0\n").status, LoadStatus::Corrupt);
    EXPECT_EQ(parse_state("cosid_state_version 02\n").status, LoadStatus::Corrupt);
    EXPECT_EQ(parse_state("cosid_state_version x\n").status, LoadStatus::Corrupt);
}

TEST(StateFile, Strict) {
    auto corrupt = [](const std::string& body, const std::string& needle) {
        const LoadResult r = parse_body(body);
        EXPECT_EQ(r.status, LoadStatus::Corrupt) << body;
        EXPECT_NE(r.message.find(needle), std::string::npos) << body << " -> " << r.message;
    };
    ASSERT_EQ(parse_body(kHead + "window a 1 2 3\nnot_before a 4\n").status, LoadStatus::Ok);
    ASSERT_EQ(parse_body("#\n# two comments\n" + kHead).status, LoadStatus::Ok);
    corrupt("", "line 1 is not the cosid_state_version");
    EXPECT_EQ(parse_state("").message, "it is empty");
    EXPECT_EQ(parse_state("# only a comment\n").message, "it ends before its version line (truncated)");
    corrupt("system_identifier 1\ncosid_state_version 1\n", "line 1 is not the cosid_state_version");
    corrupt("\n" + kHead, "line 1 is not the cosid_state_version");
    corrupt(kHead + "# late comment\n", "line 3 is not a system_identifier, a window, a not_before or the checksum");
    corrupt(kHead + "lease a 1\n", "line 3 is not");
    corrupt(kHead + "\n", "line 3 is not");
    corrupt(kHead + "cosid_state_version 1\n", "line 3 is not");
    corrupt(kHead + "system_identifier 1\n", "a second system_identifier on line 3");
    corrupt("cosid_state_version 1\n", "no system_identifier");
    corrupt("cosid_state_version 1\nsystem_identifier 18446744073709551616\n", "bad system_identifier");
    ASSERT_EQ(parse_body("cosid_state_version 1\nsystem_identifier 18446744073709551615\n").status, LoadStatus::Ok);
    corrupt(kHead + "window a 1 2 3\nwindow a 1 5 3\n", "a second window");
    ASSERT_EQ(parse_body(kHead + "window a 1 2 3\nwindow a 2 5 3\nwindow b 1 5 3\n").status, LoadStatus::Ok);
    corrupt(kHead + "window a 70000 2 3\n", "bad slot 70000 on line 3");
    corrupt(kHead + "window a -1 2 3\n", "bad slot");
    corrupt(kHead + "window a 1 -2 3\n", "bad ceiling");
    corrupt(kHead + "window a 1 +2 3\n", "bad ceiling");
    corrupt(kHead + "window a 1 02 3\n", "bad ceiling");
    corrupt(kHead + "window a 1 9223372036854775808 3\n", "bad ceiling");
    corrupt(kHead + "window a 1 2 4294967296\n", "bad timeline");
    corrupt(kHead + "window a! 1 2 3\n", "bad namespace name");
    corrupt(kHead + "window a 1 2\n", "line 3 is not");
    corrupt(kHead + "window a 1 2 3 4\n", "line 3 is not");
    corrupt(kHead + "window a  1 2 3\n", "line 3 is not");
    corrupt(kHead + "window a 1 2 3 \n", "line 3 is not");
    corrupt(kHead + "not_before a 1\nnot_before a 2\n", "a second not_before");
    corrupt(kHead + "not_before a -1\n", "bad not_before");
    // The checksum line: last, lower case, followed by exactly one newline.
    const std::string good = with_crc(kHead);
    EXPECT_EQ(parse_state(good + "\n").status, LoadStatus::Corrupt);
    EXPECT_EQ(parse_state(good + "x").status, LoadStatus::Corrupt);
    EXPECT_EQ(parse_state(good + "window a 1 2 3\n").status, LoadStatus::Corrupt);
    EXPECT_EQ(parse_state(good.substr(0, good.size() - 1) + "\r\n").status, LoadStatus::Corrupt);
    std::string upper = good;
    for (size_t i = upper.rfind(' '); i < upper.size(); ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
    if (upper != good) {
        EXPECT_EQ(parse_state(upper).status, LoadStatus::Corrupt);
    }
    EXPECT_EQ(parse_state(kHead + "crc32c 1234567\n").status, LoadStatus::Corrupt);
}

TEST(StateFile, LoadMissingAndDirectory) {
    const std::string dir = make_temp_dir();
    LoadResult r = load_state(dir + "/none");
    EXPECT_EQ(r.status, LoadStatus::Missing);
    r = load_state(dir);
    EXPECT_EQ(r.status, LoadStatus::Unreadable);
    EXPECT_EQ(r.message.find(dir), std::string::npos);  // the caller adds the path
    {
        std::ofstream big(dir + "/big");
        big << std::string(kMaxStateFileBytes + 1, '#');
    }
    EXPECT_EQ(load_state(dir + "/big").status, LoadStatus::Unreadable);
    { std::ofstream empty(dir + "/empty"); }
    EXPECT_EQ(load_state(dir + "/empty").status, LoadStatus::Corrupt);
    unlink((dir + "/big").c_str());
    unlink((dir + "/empty").c_str());
    rmdir(dir.c_str());
}

TEST(StateFile, SaveThenLoad) {
    const std::string dir = make_temp_dir(), path = dir + "/cosid.state";
    StateFile f = sample();
    ASSERT_FALSE(save_state(path, f));
    EXPECT_FALSE(exists(path + ".tmp"));
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    LoadResult r = load_state(path);
    ASSERT_EQ(r.status, LoadStatus::Ok) << r.message;
    expect_same(f, r.file);

    f.set_window("orders", 7, 1733250009999, 2);  // overwrite the existing file
    ASSERT_FALSE(save_state(path, f));
    EXPECT_FALSE(exists(path + ".tmp"));
    r = load_state(path);
    ASSERT_EQ(r.status, LoadStatus::Ok) << r.message;
    expect_same(f, r.file);

    // A relative path: its directory is the current one.
    char cwd[4096];
    ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
    ASSERT_EQ(chdir(dir.c_str()), 0);
    const auto err = save_state("relative.state", f);
    const LoadResult rel = load_state("relative.state");
    ASSERT_EQ(chdir(cwd), 0);
    EXPECT_FALSE(err) << *err;
    EXPECT_EQ(rel.status, LoadStatus::Ok);

    unlink(path.c_str());
    unlink((dir + "/relative.state").c_str());
    rmdir(dir.c_str());
}

TEST(StateFile, SaveIntoMissingDirectory) {
    const std::string dir = make_temp_dir(), path = dir + "/no/such/dir/cosid.state";
    const auto err = save_state(path, sample());
    ASSERT_TRUE(err);
    EXPECT_NE(err->find(path + ".tmp"), std::string::npos) << *err;
    EXPECT_NE(err->find("No such file or directory"), std::string::npos) << *err;
    rmdir(dir.c_str());
}

TEST(Adopt, Floor) {
    Layout ms;  // 41/10/12, ms, epoch 2024-01-01
    Layout s;
    s.timestamp_bits = 31;
    s.slot_bits = 16;
    s.sequence_bits = 16;
    s.unit = Unit::Second;
    ASSERT_FALSE(ms.validate());
    ASSERT_FALSE(s.validate());
    for (const Layout& l : {ms, s}) {
        const int64_t t0 = l.epoch_tick();
        for (int64_t max_id : {int64_t{0}, int64_t{1}, l.pack(t0 + 1000, 5, 77), l.pack(t0 + 1000, 0, 0),
                               l.pack(t0 + 1000, l.max_slot(), l.max_sequence()), l.pack(l.max_tick() - 1, 3, 3)}) {
            const AdoptFloor a = adopt_floor(l, max_id);
            ASSERT_EQ(a.status, AdoptFloor::Ok) << max_id;
            EXPECT_EQ(a.floor_ms % l.unit_ms(), 0);
            const int64_t floor_tick = a.floor_ms / l.unit_ms();
            EXPECT_GT(l.pack(floor_tick + 1, 0, 0), max_id);
            EXPECT_GE(l.pack(floor_tick, l.max_slot(), l.max_sequence()), max_id);
        }
        EXPECT_EQ(adopt_floor(l, 0).floor_ms, l.epoch_ms);
        const AdoptFloor neg = adopt_floor(l, -5);
        EXPECT_EQ(neg.status, AdoptFloor::Negative);
        EXPECT_EQ(neg.floor_ms, 0);
        EXPECT_EQ(adopt_floor(l, l.pack(l.max_tick(), 0, 0)).status, AdoptFloor::LastTick);
        EXPECT_EQ(adopt_floor(l, INT64_MAX).status, AdoptFloor::LastTick);
        EXPECT_EQ(adopt_floor(l, INT64_MAX).floor_ms, l.max_tick() * l.unit_ms());
    }
}

// A 53-bit namespace has no id at or past 2^53: a column of 63-bit ids is not in its layout.
TEST(Adopt, FloorOfAShortLayout) {
    Layout web;
    web.timestamp_bits = 41;
    web.slot_bits = 4;
    web.sequence_bits = 8;
    ASSERT_FALSE(web.validate());
    EXPECT_EQ(adopt_floor(web, (int64_t{1} << 53) - 1).status, AdoptFloor::LastTick);
    EXPECT_EQ(adopt_floor(web, int64_t{1} << 53).status, AdoptFloor::NotInLayout);
    EXPECT_EQ(adopt_floor(web, INT64_MAX).status, AdoptFloor::NotInLayout);
    EXPECT_EQ(adopt_floor(web, web.pack(web.epoch_tick() + 5000, 15, 255)).status, AdoptFloor::Ok);
}

TEST(Adopt, LatestEpochExceeding) {
    Layout ms;
    Layout s;
    s.timestamp_bits = 31;
    s.slot_bits = 16;
    s.sequence_bits = 16;
    s.unit = Unit::Second;
    s.epoch_ms = 0;
    const int64_t now_ms = 1796282417816LL;
    for (const Layout& l : {ms, s}) {
        for (int64_t max_id :
             {int64_t{0}, int64_t{12345}, int64_t{1} << 40, (int64_t{1} << 55) + 99, int64_t{1} << 60}) {
            const int64_t e = latest_epoch_exceeding(l, max_id, now_ms);
            EXPECT_EQ(e % l.unit_ms(), 0) << max_id;
            EXPECT_LE(e, now_ms);
            Layout with = l;
            with.epoch_ms = e;
            const int64_t now_tick = now_ms / l.unit_ms();
            if (e >= 0 && with.tick_fits(now_tick)) {
                EXPECT_GT(with.pack(now_tick, 0, 0), max_id) << max_id;
            }
            // One unit later is no longer enough for the smallest id of the tick.
            Layout later = l;
            later.epoch_ms = e + l.unit_ms();
            if (later.epoch_ms >= 0 && later.tick_fits(now_tick)) {
                EXPECT_LE(later.pack(now_tick, 0, 0), max_id) << max_id;
            }
        }
        // A column from the layout itself: the suggestion is at or after the layout's epoch
        // as long as the column is behind the clock.
        const int64_t max_id = l.pack(now_ms / l.unit_ms() - 10, 1, 1);
        EXPECT_GE(latest_epoch_exceeding(l, max_id, now_ms), l.epoch_ms);
        EXPECT_EQ(latest_epoch_exceeding(l, -1, now_ms), now_ms / l.unit_ms() * l.unit_ms());
    }
}

// cosid.not_before may name the timeline it vouches for.
TEST(NotBefore, TimestampWithAnOptionalTimeline) {
    NotBefore nb;
    ASSERT_FALSE(parse_not_before("2026-12-03 07:20:17+00", &nb));
    EXPECT_EQ(nb.ms, ts_ok("2026-12-03 07:20:17+00"));
    EXPECT_EQ(nb.timeline, 0u);
    ASSERT_FALSE(parse_not_before("  2026-12-03 07:20:17.5Z on timeline 2 ", &nb));
    EXPECT_EQ(nb.ms, ts_ok("2026-12-03 07:20:17.5Z"));
    EXPECT_EQ(nb.timeline, 2u);
    ASSERT_FALSE(parse_not_before("2026-12-03T07:20+01:00 on timeline 4294967295", &nb));
    EXPECT_EQ(nb.timeline, 4294967295u);
    ASSERT_FALSE(parse_not_before("", &nb));
    EXPECT_EQ(nb.ms, 0);
    EXPECT_EQ(nb.timeline, 0u);
    NotBefore untouched;
    untouched.ms = 77;
    untouched.timeline = 9;
    for (const char* bad : {"2026-12-03 07:20:17+00 on timeline 0", "2026-12-03 07:20:17+00 on timeline",
                            "2026-12-03 07:20:17+00 on timeline -1", "2026-12-03 07:20:17+00 on timeline 4294967296",
                            "2026-12-03 07:20:17+00 on timeline 02", "on timeline 2", "yesterday on timeline 2",
                            "2026-12-03 07:20:17 on timeline 2"}) {
        NotBefore v = untouched;
        EXPECT_TRUE(parse_not_before(bad, &v)) << bad;
        EXPECT_EQ(v.ms, 77) << bad;
        EXPECT_EQ(v.timeline, 9u) << bad;
    }
}

// --- static slots without a state file (docs/static-slots.md, "Without a state file") ---

TEST(StaticNoFile, RulesApplyOnlyWithoutAFile) {
    EXPECT_EQ(static_borrow_ms(true, issue_word::kBorrowToCeiling), issue_word::kBorrowToCeiling);
    EXPECT_EQ(static_borrow_ms(true, 250), 250);
    EXPECT_EQ(static_borrow_ms(false, issue_word::kBorrowToCeiling), 0);
    EXPECT_EQ(static_borrow_ms(false, 250), 0);
    // with a file: the file's value and the not-befores; the keeper's start plays no part
    EXPECT_EQ(static_window_floor(0, 0, true, 5000), 0);
    EXPECT_EQ(static_window_floor(7000, 6000, true, 9000), 7000);
    EXPECT_EQ(static_window_floor(6000, 7000, true, 9000), 7000);
    // without: never below the clock at the start
    EXPECT_EQ(static_window_floor(0, 0, false, 5000), 5000);
    EXPECT_EQ(static_window_floor(7000, 6000, false, 5000), 7000);
    EXPECT_EQ(static_window_floor(6000, 7000, false, 5000), 7000);
    EXPECT_EQ(static_window_floor(6000, 7000, false, 9000), 9000);
}

// --- the database's copy of the ceilings (static slots across pg_upgrade) ---

TEST(StaticRecorded, OtherClustersRowsRaiseTheFloor) {
    // pg_upgrade: the new cluster has no file (nothing in its model) and the old one's row
    EXPECT_EQ(static_recorded_ms(0, false, 90000, std::nullopt, true), 90000);
    EXPECT_EQ(static_recorded_ms(0, false, 90000, std::nullopt, false), 90000);  // also without a file
    // a file of its own that is further on wins; the rows never lower anything
    EXPECT_EQ(static_recorded_ms(95000, true, 90000, std::nullopt, true), 95000);
    EXPECT_EQ(static_recorded_ms(85000, true, 90000, 80000, true), 90000);
}

TEST(StaticRecorded, ItsOwnRowOnlyWhenTheFileLostTheSlot) {
    // the file is the exact memory: a release lowered it below the row's ceiling
    EXPECT_EQ(static_recorded_ms(80000, true, std::nullopt, 90000, true), 80000);
    // a file kept but without the slot (deleted, replaced by an empty one): the row
    EXPECT_EQ(static_recorded_ms(0, false, std::nullopt, 90000, true), 90000);
    EXPECT_EQ(static_recorded_ms(0, false, 70000, 90000, true), 90000);
    // without a file the clock rules bound a restart; its own row would only delay it
    EXPECT_EQ(static_recorded_ms(0, false, std::nullopt, 90000, false), 0);
    EXPECT_EQ(static_recorded_ms(70000, true, std::nullopt, 90000, false), 70000);
}

TEST(StaticRecorded, NoRowKeepsTheModel) {
    EXPECT_EQ(static_recorded_ms(0, false, std::nullopt, std::nullopt, true), 0);
    EXPECT_EQ(static_recorded_ms(70000, true, std::nullopt, std::nullopt, true), 70000);
}

namespace {

// One run of a static slot: `n` ids claimed one at a time from a window (floor, floor +
// ahead], the clock advancing `step_us` microseconds per claim (a busy slot: faster than its
// ticks hold ids) and jumping to the time a wait ends.  Returns the clock after the last
// claim; the ids go to `ids`.
int64_t run_slot(const Layout& l, int64_t floor_ms, int64_t ceiling_ms, int64_t start_us, int n, int64_t borrow_ms,
                 int64_t step_us, std::vector<int64_t>* ids) {
    uint64_t w = issue_word::kFresh;
    int64_t now_us = start_us;
    for (int k = 0; k < n;) {
        const Claim c = claim(w, l, 3, ClaimWindow{floor_ms, ceiling_ms}, now_us / 1000, borrow_ms);
        if (c.status == NextStatus::Issued) {
            w = c.word;
            ids->push_back(c.id);
            ++k;
            now_us += step_us;
        } else if (c.status == NextStatus::SequenceExhausted || c.status == NextStatus::BeforeFloor) {
            now_us = std::max(now_us, c.wait_until_ms * 1000);
        } else {
            ADD_FAILURE() << "unexpected claim status " << static_cast<int>(c.status);
            break;
        }
    }
    return now_us;
}

// A 53-bit seconds layout with 4,096 ids per second per slot, as test/e2e/static_no_file.sh.
Layout seconds53() {
    Layout l;
    l.unit = Unit::Second;
    l.slot_bits = 4;
    l.sequence_bits = 12;
    l.timestamp_bits = 53 - 4 - 12;
    EXPECT_FALSE(l.validate().has_value());
    return l;
}

// Two runs without a state file, the second started `gap_us` after the first's last claim
// (the clock never moving back): how many ids of the second repeat one of the first.
int repeated_after_restart(const Layout& l, bool fixed, int64_t gap_us) {
    const int64_t ahead = 10000, t0_us = (kDefaultEpochMs + 86400000 + 123) * 1000;
    const int64_t borrow = fixed ? static_borrow_ms(false, issue_word::kBorrowToCeiling) : issue_word::kBorrowToCeiling;
    std::vector<int64_t> first, second;
    // the first run's keeper started at t0, its memory empty: floor from the rule (0 before)
    int64_t floor = fixed ? static_window_floor(0, 0, false, t0_us / 1000) : 0;
    int64_t now_us = run_slot(l, floor, std::max(floor, t0_us / 1000) + ahead, t0_us, 24000, borrow, 20, &first);
    // the restart: the keeper's memory is empty again (whatever it knew is gone)
    const int64_t start_us = now_us + gap_us;
    floor = fixed ? static_window_floor(0, 0, false, start_us / 1000) : 0;
    run_slot(l, floor, std::max(floor, start_us / 1000) + ahead, start_us, 5000, borrow, 20, &second);
    const std::set<int64_t> before(first.begin(), first.end());
    EXPECT_EQ(before.size(), first.size());
    int repeated = 0;
    for (int64_t id : second) repeated += before.count(id) > 0;
    if (fixed) {
        // nothing ahead of the clock, and the second run starts in a later tick
        EXPECT_LE(l.tick_ms(l.unpack(first.back()).tick).value(), now_us / 1000);
        EXPECT_GT(l.unpack(second.front()).tick, l.unpack(first.back()).tick);
    }
    return repeated;
}

}  // namespace

TEST(StaticNoFile, ARestartNeverRepeatsAnId) {
    const Layout s = seconds53();
    Layout ms;  // the default layout: 4,096 ids per ms
    // gaps: in the same ms as the last claim, within the same second, a second, past the
    // old window's ceiling
    for (int64_t gap_us : {0LL, 1000LL, 300000LL, 1000000LL, 12000000LL}) {
        EXPECT_EQ(repeated_after_restart(s, true, gap_us), 0) << "gap " << gap_us << " us";
        EXPECT_EQ(repeated_after_restart(ms, true, gap_us), 0) << "gap " << gap_us << " us";
    }
    // The rules before (borrowing to the ceiling, the first floor at cosid.not_before) repeated
    // every id of a restart within the borrowed seconds, as the end-to-end test measured.
    EXPECT_EQ(repeated_after_restart(s, false, 1000000), 5000);
    EXPECT_GT(repeated_after_restart(s, false, 0), 0);
}

TEST(StaticNoFile, NoBorrowCapsATickAtItsSequence) {
    const Layout l = seconds53();
    const int64_t t0 = (kDefaultEpochMs / 1000 + 86400) * 1000;  // the start of a second
    std::vector<int64_t> ids;
    // 3 ticks' worth of ids asked for within a few ms: the clock must pass 2 seconds
    const int64_t end_us = run_slot(l, static_window_floor(0, 0, false, t0 - 1), t0 + 10000, t0 * 1000, 3 * 4096,
                                    static_borrow_ms(false, issue_word::kBorrowToCeiling), 1, &ids);
    EXPECT_GE(end_us, (t0 + 2000) * 1000);
    EXPECT_EQ(l.unpack(ids.back()).tick, l.tick_of(t0) + 2);
}
