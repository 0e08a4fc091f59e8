#!/usr/bin/env python3
"""Checks the store's lock order in sql/functions/*.sql (src/README.md, "The store's lock
order": a namespace's row, cosid.store_state, cosid.fork_declared, cosid.lease):
  - only cosid._store_state_lock takes SHARE ROW EXCLUSIVE on cosid.store_state (it refuses to
    wait where the caller already holds lease rows);
  - a function that marks the store a fork and records the fork marks it first;
  - a function that writes or locks cosid.lease rows, or calls one that does, follows the
    timeline (or takes the state's lock) before its first such statement; a later call in a
    loop is guarded at run time (cosid._store_state_lock refuses to wait there);
  - a function that locks a namespace's row does so before all of those.
Usage: check_sql.py ROOT | --self-test.  Prints "ok - ..." / "not ok - ..." lines."""
import glob, os, re, sys

FUNCTION = re.compile(r'^CREATE OR REPLACE FUNCTION ([\w.]+)\(', re.M)
STATE_SRX = re.compile(r'LOCK TABLE cosid\.store_state IN SHARE ROW EXCLUSIVE MODE', re.I)
# (a statement on the rows, or a call of a function that writes them)
LEASE_WRITE = re.compile(r'UPDATE cosid\.lease\b|INSERT INTO cosid\.lease\b|DELETE FROM cosid\.lease\b'
                         r'|FROM cosid\.lease\b[^;]*FOR (NO KEY )?UPDATE'
                         r'|cosid\.(acquire|renew|release|revoke)\(', re.I)
FOLLOW = re.compile(r'cosid\._follow_timeline\(|cosid\._store_state_lock\(')
# a namespace's row locked, and what must come after it
NAMESPACE_LOCK = re.compile(r'FROM cosid\.namespace\b[^;]*FOR (NO KEY |KEY )?(UPDATE|SHARE)', re.I)
AFTER_NAMESPACE = re.compile(FOLLOW.pattern + '|' + LEASE_WRITE.pattern + r'|LOCK TABLE cosid\.lease\b', re.I)
# (the two that take the locks themselves, in the order above)
OWN_ORDER = {'cosid._follow_timeline', 'cosid._store_state_lock'}


def code(body):
    """The body without its comments and string literals (either may name any statement)."""
    return re.sub(r"'(?:[^']|'')*'", "''", re.sub(r'--[^\n]*', '', body))


def functions(text):
    """(name, body): each definition's text from its AS, without comments."""
    starts = [(m.start(), m.group(1)) for m in FUNCTION.finditer(text)]
    for i, (at, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        body = code(text[at:end])
        yield name, body[body.find('$$'):] if '$$' in body else body


def problems(files):
    """(checked, [problem]) over {path: text}."""
    found, checked = [], 0
    for path, text in sorted(files.items()):
        for name, body in functions(text):
            checked += 1
            where = '%s (%s)' % (name, os.path.basename(path))
            if STATE_SRX.search(body) and name != 'cosid._store_state_lock':
                found.append('%s takes SHARE ROW EXCLUSIVE on cosid.store_state itself: call '
                             'cosid._store_state_lock()' % where)
            mark, record = body.find('cosid._fork_mark('), body.find('INSERT INTO cosid.fork_declared')
            if mark >= 0 and record >= 0 and record < mark:
                found.append('%s records a fork in cosid.fork_declared before it marks cosid.store_state' % where)
            row = NAMESPACE_LOCK.search(body)
            before = AFTER_NAMESPACE.search(body)
            if row and before and before.start() < row.start():
                found.append('%s locks a namespace\'s row after the store\'s state or lease rows' % where)
            write = LEASE_WRITE.search(body)
            if write and name not in OWN_ORDER:
                follow = FOLLOW.search(body)
                if follow is None or follow.start() > write.start():
                    found.append('%s writes or locks cosid.lease rows before it follows the timeline' % where)
    return checked, found


def report(checked, found):
    for p in found:
        print('not ok - %s' % p)
    print('%s - the store\'s lock order in %d SQL functions' % ('not ok' if found else 'ok', checked))
    return 1 if found else 0


def self_test():
    """Each rule finds its breach in a sample, and a sample that keeps them passes."""
    good = '''CREATE OR REPLACE FUNCTION cosid.a() RETURNS void AS $$
BEGIN
    PERFORM cosid._follow_timeline(NULL);  -- UPDATE cosid.lease in a comment first
    UPDATE cosid.lease SET fence = fence + 1;
    PERFORM cosid._fork_mark('x');
    INSERT INTO cosid.fork_declared VALUES ('x');
END $$;
CREATE OR REPLACE FUNCTION cosid._store_state_lock() RETURNS void AS $$
    LOCK TABLE cosid.store_state IN SHARE ROW EXCLUSIVE MODE;
$$;
'''
    bad = {
        'a direct lock': 'CREATE OR REPLACE FUNCTION cosid.b() RETURNS void AS $$\n'
                         '    LOCK TABLE cosid.store_state IN SHARE ROW EXCLUSIVE MODE;\n$$;\n',
        'a fork recorded first': 'CREATE OR REPLACE FUNCTION cosid.b() RETURNS void AS $$\n'
                                 "    INSERT INTO cosid.fork_declared VALUES ('x');\n"
                                 "    PERFORM cosid._fork_mark('x');\n$$;\n",
        'rows locked first': 'CREATE OR REPLACE FUNCTION cosid.b() RETURNS void AS $$\n'
                             '    FOR r IN SELECT 1 FROM cosid.lease l ORDER BY 1 FOR UPDATE LOOP\n'
                             '        PERFORM cosid._follow_timeline(NULL);\n    END LOOP;\n$$;\n',
        'a namespace locked last': 'CREATE OR REPLACE FUNCTION cosid.b() RETURNS void AS $$\n'
                                   '    LOCK TABLE cosid.lease IN SHARE MODE;\n'
                                   "    PERFORM FROM cosid.namespace n WHERE n.name = 'x' FOR UPDATE;\n$$;\n",
        'a lease function called first': 'CREATE OR REPLACE FUNCTION cosid.b() RETURNS void AS $$\n'
                                         "    PERFORM cosid.revoke('n', 1);\n"
                                         '    PERFORM cosid._follow_timeline(NULL);\n$$;\n',
    }
    fails = 0
    _, found = problems({'good.sql': good})
    print('%s - check_sql.py passes a sample that keeps the order' % ('not ok' if found else 'ok'))
    fails += bool(found)
    for what, sample in bad.items():
        _, found = problems({'bad.sql': good + sample})
        print('%s - check_sql.py finds %s' % ('ok' if len(found) == 1 else 'not ok', what))
        fails += len(found) != 1
    return 1 if fails else 0


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    if sys.argv[1] == '--self-test':
        sys.exit(self_test())
    paths = glob.glob(os.path.join(sys.argv[1], 'sql', 'functions', '*.sql'))
    checked, found = problems({p: open(p).read() for p in paths})
    sys.exit(report(checked, found) if paths else report(0, ['no sql/functions/*.sql under %s' % sys.argv[1]]))
