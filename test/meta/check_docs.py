#!/usr/bin/env python3
"""Checks the documentation: README.md stays short and starts with the two commands, every
relative link and anchor in README.md and docs/*.md points somewhere, and docs/reference.md
documents every public function (sql/cosid--BASE.sql and its update scripts to
DEFAULT_VERSION, names without a leading underscore) and every cosid.* setting (src/pg/settings.cpp), and that no page a user reads
names what a user does not have: an issue number, DESIGN.md, ../shared, a test's path or name
(docs/development.md may name anything; docs/faults.md shows evidence: test names there),
and that every fenced block of README.md and docs/*.md is either run by the test command or
says why not: a <!-- doc-test: KIND --> marker on the line before it (test/meta/doc_blocks.py),
`skip REASON` for a block that cannot run here, and a page with blocks of other kinds than sql
(file, sh, env, conf, output) run by a test/e2e script through doc_blocks.py --steps.
Usage: check_docs.py ROOT       prints "ok - ..." / "not ok - ..." lines, "# warning: ..." lines
       check_docs.py --self-test plants each defect in a small tree and expects it caught"""
import glob, os, re, shutil, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doc_blocks  # noqa: E402 (the extractor the tests run the blocks with)

README_MAX_BYTES = 20000
COMMANDS = ('bash scripts/demo.sh', 'bash scripts/test.sh')
COMMANDS_WITHIN = 600  # bytes from the start of README.md
# Pages other sessions write. A link to one of them is accepted while it does not exist, with a
# warning; remove this list once they are merged, and links to them are checked like any other.
PENDING_PAGES = set()
# Pages another session rewrites now: their internal references are reported as warnings, not
# failures, until that work is merged (then empty this set).
PAGES_BEING_REWRITTEN = set()
DEVELOPER_PAGES = {'docs/development.md'}  # may name anything
EVIDENCE_PAGES = {'docs/faults.md'}        # may name the tests that measured each fault

FENCE = re.compile(r'^\s*(```|~~~)')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')
INLINE_LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
REF_LINK = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$')
HTML_ANCHOR = re.compile(r'<a\s+(?:name|id)="([^"]+)"', re.I)
CODE_SPAN = re.compile(r'(`+)(.+?)\1')


def prose_lines(text):
    """The lines outside fenced code blocks, with their numbers."""
    fenced = False
    for number, line in enumerate(text.split('\n'), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading: its rendered text, lower case, punctuation other than
    '-' and '_' dropped, spaces made '-'."""
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # a link renders as its text
    text = text.replace('`', '').replace('*', '')
    text = re.sub(r'<[^>]+>', '', text)
    return re.sub(r'[^\w\- ]', '', text.strip().lower()).replace(' ', '-')


def anchors(path):
    seen, found = {}, set()
    for _, line in prose_lines(open(path, encoding='utf-8').read()):
        found.update(HTML_ANCHOR.findall(line))
        m = HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else '%s-%d' % (base, n))
    return found


def links(path):
    for number, line in prose_lines(open(path, encoding='utf-8').read()):
        line = CODE_SPAN.sub('', line)
        for m in INLINE_LINK.finditer(line):
            yield number, m.group(1)
        m = REF_LINK.match(line)
        if m:
            yield number, m.group(1)


def check_links(root, page, warnings, checked):
    """Problems of the relative links of one page; links to pending pages that do not exist
    yet are accepted into `warnings`. Counts the relative links into checked[0]."""
    problems = []
    here = os.path.dirname(os.path.join(root, page))
    for number, target in links(os.path.join(root, page)):
        if re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I):
            continue  # http:, https:, mailto:
        checked[0] += 1
        path, _, anchor = target.partition('#')
        full = os.path.normpath(os.path.join(here, path)) if path else os.path.join(root, page)
        rel = os.path.relpath(full, root).replace(os.sep, '/')
        where = '%s:%d: %s' % (page, number, target)
        if rel.startswith('../'):
            problems.append(where + ' (outside the repository)')
        elif not os.path.exists(full):
            if rel in PENDING_PAGES:
                warnings.append('%s: accepted while it does not exist: a page other sessions write '
                                '(PENDING_PAGES in test/meta/check_docs.py)' % where)
            else:
                problems.append(where + ' (no such file)')
        elif anchor and full.endswith('.md') and anchor not in anchors(full):
            problems.append(where + ' (no heading or anchor "%s" in %s)' % (anchor, rel))
    return problems


def first_cells(path):
    """The names in code spans of the first cell of every table row of a page."""
    names = set()
    for _, line in prose_lines(open(path, encoding='utf-8').read()):
        if not line.startswith('|') or re.match(r'^\|[\s:|-]+\|?\s*$', line):
            continue
        cell = re.split(r'(?<!\\)\|', line)[1]
        for _, code in CODE_SPAN.findall(cell):
            names.update(re.findall(r'[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?', code))
    return names


def public_functions(root):
    """The public functions and views of default_version: cosid--BASE.sql and then each update
    script of the chain to default_version, as CREATE EXTENSION runs them (a function dropped
    on the way is gone unless made again)."""
    control = open(os.path.join(root, 'cosid.control')).read()
    version = re.search(r"default_version\s*=\s*'([^']+)'", control).group(1)
    names = os.listdir(os.path.join(root, 'sql'))
    # (the version being developed: its update script is built from sql/updates/ and
    # sql/functions/, and read from them when it has not been built)
    names += ['cosid--' + n for n in os.listdir(os.path.join(root, 'sql', 'updates'))] \
        if os.path.isdir(os.path.join(root, 'sql', 'updates')) else []
    base = sorted(m.group(1) for m in (re.match(r'^cosid--([^-]+)\.sql$', n) for n in names) if m)[0]
    steps = dict(m.groups() for m in (re.match(r'^cosid--([^-]+)--([^-]+)\.sql$', n) for n in names) if m)
    chain, v = ['cosid--%s.sql' % base], base
    while v != version and v in steps and len(chain) <= len(steps):
        chain.append('cosid--%s--%s.sql' % (v, steps[v]))
        v = steps[v]
    count = {}  # overloads of each name
    for script in chain:
        path = os.path.join(root, 'sql', script)
        if os.path.exists(path):
            text = open(path).read()
        else:
            text = open(os.path.join(root, 'sql', 'updates', script[len('cosid--'):])).read() + ''.join(
                open(f).read() for f in sorted(glob.glob(os.path.join(root, 'sql', 'functions', '*.sql'))))
        text = re.sub(r'--[^\n]*', '', text)
        for verb, replace, name in re.findall(
                r'\b(CREATE|DROP)\s+(OR\s+REPLACE\s+)?(?:FUNCTION|PROCEDURE|VIEW)\s+(?:IF\s+EXISTS\s+)?([\w.]+)', text, re.I):
            if verb.upper() == 'DROP':
                count[name] = count.get(name, 0) - 1
            elif not replace or count.get(name, 0) <= 0:
                count[name] = max(count.get(name, 0), 0) + 1
    where = 'sql/' + chain[0] + (' and its update scripts to %s' % version if len(chain) > 1 else '')
    return where, sorted(n for n, c in count.items() if c > 0 and not n.split('.')[-1].startswith('_'))


def settings(root):
    text = open(os.path.join(root, 'src', 'pg', 'settings.cpp')).read()
    return sorted(set(re.findall(r'DefineCustom\w+Variable\(\s*"(cosid\.\w+)"', text)))


def internal_patterns(root):
    """[(regex, what, allowed on an evidence page)]: what a user's page must not name."""
    patterns = [(re.compile(r'\bissue\s+#?\d+(?![\d,.]*\d)', re.I), 'an issue number', False),
                (re.compile(r'\.\./shared\b'), 'a path outside the repository (../shared)', False),
                (re.compile(r'\bDESIGN\.md\b'), 'DESIGN.md (not in the project)', False),
                (re.compile(r'(?<![\w./-])test/[\w./-]+'), 'a test path', True)]
    tests = {os.path.basename(p) for p in glob.glob(os.path.join(root, 'test', 'e2e', '*.sh'))}
    tests |= {os.path.basename(p) for p in glob.glob(os.path.join(root, 'test', 'specs', '*.spec'))}
    regress = {os.path.basename(p) for p in glob.glob(os.path.join(root, 'test', 'sql', '*.sql'))}
    for name in sorted(tests):
        patterns.append((re.compile(r'(?<![\w./-])%s\b' % re.escape(name)), 'a test (%s)' % name, True))
    for name in sorted(regress):
        patterns.append((re.compile(r'(?<![\w.-])sql/%s\b' % re.escape(name)), 'a pg_regress test (test/sql/%s)' % name, True))
    return patterns


def check_internal(root, page, patterns):
    """'page:line: what (text)' for each internal reference of a user's page."""
    if page in DEVELOPER_PAGES:
        return []
    found = []
    for number, line in enumerate(open(os.path.join(root, page), encoding='utf-8').read().split('\n'), 1):
        for regex, what, evidence in patterns:
            if evidence and page in EVIDENCE_PAGES:
                continue
            m = regex.search(line)
            if m:
                found.append('%s:%d: %s (%s)' % (page, number, what, m.group(0)))
    return found


def check_blocks(root, pages):
    """'page:line: what' for each fenced block without a marker, with an unknown kind, a skip
    without a reason, a file without a name, and each page whose file, sh or env blocks no
    test/e2e script runs (doc_blocks.py --steps and the page's path in one script)."""
    problems, counts = [], {}
    runners = []
    for script in sorted(glob.glob(os.path.join(root, 'test', 'e2e', '*.sh'))):
        text = open(script, encoding='utf-8').read()
        if 'doc_blocks.py' in text and '--steps' in text:
            runners.append(text)
    for page in pages:
        path = os.path.join(root, page)
        steps_needed = False
        for line, kind, arg in doc_blocks.fences(path):
            where = '%s:%d' % (page, line)
            if kind is None:
                problems.append(where + ': a fenced block without a marker on the line before it '
                                '(<!-- doc-test: sql|file NAME|sh|env|conf NAME|output|skip REASON -->)')
            elif kind not in doc_blocks.KINDS:
                problems.append('%s: unknown marker kind "%s" (one of %s)' % (where, kind, ', '.join(doc_blocks.KINDS)))
            elif kind == 'skip' and not (arg or '').strip():
                problems.append(where + ': skip without a reason (<!-- doc-test: skip REASON -->)')
            elif kind in ('file', 'conf') and not arg:
                problems.append('%s: %s without a name (<!-- doc-test: %s NAME -->)' % (where, kind, kind))
            else:
                counts[kind] = counts.get(kind, 0) + 1
                steps_needed |= kind not in ('sql', 'skip')
        if steps_needed and not any(re.search(r'(?<![\w.-])%s\b' % re.escape(page), t) for t in runners):
            problems.append(page + ': has blocks other than sql and skip, but no test/e2e script runs it with doc_blocks.py --steps')
    return problems, counts


def check(root):
    """[(ok, what)], [warning]"""
    results, warnings = [], []
    readme = os.path.join(root, 'README.md')
    size = os.path.getsize(readme)
    results.append((size <= README_MAX_BYTES, 'README.md is at most %d bytes (%d)' % (README_MAX_BYTES, size)))
    start = open(readme, encoding='utf-8').read()[:COMMANDS_WITHIN]
    results.append((all(c in start for c in COMMANDS),
                    'README.md starts with the two commands (%s)' % ', '.join(COMMANDS)))

    pages = ['README.md'] + (['CHANGELOG.md'] if os.path.exists(os.path.join(root, 'CHANGELOG.md')) else []) + sorted('docs/' + os.path.basename(p) for p in glob.glob(os.path.join(root, 'docs', '*.md')))
    problems, checked = [], [0]
    for page in pages:
        problems += check_links(root, page, warnings, checked)
    results.append((checked[0] > 0 and not problems, 'every relative link and anchor resolves (%d links in %d pages)%s'
                    % (checked[0], len(pages), ''.join('\n#   ' + p for p in problems))))

    patterns, internal = internal_patterns(root), []
    for page in pages:
        for problem in check_internal(root, page, patterns):
            if page in PAGES_BEING_REWRITTEN:
                warnings.append(problem + ' (accepted while another session rewrites the page: '
                                'PAGES_BEING_REWRITTEN in test/meta/check_docs.py)')
            else:
                internal.append(problem)
    results.append((not internal, 'no user page names an issue, DESIGN.md, ../shared or a test (%d pages)%s'
                    % (len(pages), ''.join('\n#   ' + p for p in internal))))

    reference = os.path.join(root, 'docs', 'reference.md')
    documented = first_cells(reference) if os.path.exists(reference) else set()
    script, functions = public_functions(root)
    missing = [f for f in functions if f not in documented]
    results.append((functions and not missing, 'docs/reference.md has a row for each of the %d functions and views of %s%s'
                    % (len(functions), script, (': missing ' + ', '.join(missing)) if missing else '')))
    names = settings(root)
    missing = [s for s in names if s not in documented]
    results.append((names and not missing, 'docs/reference.md has a row for each of the %d cosid.* settings of src/pg/settings.cpp%s'
                    % (len(names), (': missing ' + ', '.join(missing)) if missing else '')))
    block_pages = ['README.md'] + sorted('docs/' + os.path.basename(p) for p in glob.glob(os.path.join(root, 'docs', '*.md')))
    problems, counts = check_blocks(root, block_pages)
    results.append((not problems and sum(counts.values()) > 0,
                    'every fenced block of README.md and docs/*.md is run by the test command or marked skip with its reason (%s)%s'
                    % (', '.join('%d %s' % (counts[k], k) for k in doc_blocks.KINDS if k in counts),
                       ''.join('\n#   ' + p for p in problems))))
    return results, warnings


def self_test():
    """Each planted defect fails exactly the check meant to catch it; the clean tree passes."""
    def tree(base):
        files = {
            'cosid.control': "default_version = '9.9'\n",
            'sql/cosid--9.9.sql': 'CREATE FUNCTION cosid_next() RETURNS bigint;\n'
                                  'CREATE FUNCTION cosid.acquire(p text) RETURNS int;\n'
                                  'CREATE FUNCTION cosid._hidden() RETURNS int;\nCREATE VIEW cosid_owners AS SELECT 1;\n',
            'test/e2e/t.sh': '#!/bin/sh\n',
            'test/sql/next.sql': 'SELECT 1;\n',
            'CHANGELOG.md': '# Changelog\n\n## [9.9]\n\n- issues 64,000 ids per second; see docs/reference.md\n',
            'docs/development.md': '# Development\n\n`test/e2e/t.sh`, `test/sql/next.sql`, issue 12 and ../shared/pg are fine here.\n',
            'docs/faults.md': '# Faults\n\n| fault | promise | measured |\n|---|---|---|\n| a crash (`t.sh`, `test/e2e/t.sh`) | kept | 0 |\n',
            'src/pg/settings.cpp': 'DefineCustomIntVariable("cosid.ttl", "x");\nDefineCustomStringVariable(\n  "cosid.database", "y");\n',
            'README.md': '# t\n\n<!-- doc-test: skip the test command itself -->\n```sh\nbash scripts/demo.sh\nbash scripts/test.sh\n```\n\n'
                         '[ref](docs/reference.md#functions), [up](#t)\n',
            'docs/reference.md': '# Reference\n\n## Functions\n\n| function | what |\n|---|---|\n'
                                 '| `cosid_next() → bigint` | x |\n| `cosid.acquire`, view `cosid_owners` | y |\n\n'
                                 '## Settings\n\n| setting | meaning |\n|---|---|\n| `cosid.ttl` | z |\n| `cosid.database` | w |\n'
                                 '\n<!-- doc-test: skip an example -->\n```\n[not a link](nowhere.md)\n```\n'
                                 '\n<!-- doc-test: sql -->\n```sql\nSELECT 1;\n```\n[readme](../README.md#t) and `[code](nowhere.md)`\n',
        }
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(base, name)) or base, exist_ok=True)
            open(os.path.join(base, name), 'w').write(text)

    def append(name, text):
        return lambda base: open(os.path.join(base, name), 'a').write(text)

    def replace(name, old, new):
        def f(base):
            path = os.path.join(base, name)
            text = open(path).read()
            assert old in text
            open(path, 'w').write(text.replace(old, new))
        return f

    cases = [  # (what is planted, change, index of the check that must fail alone)
        ('nothing', None, None),
        ('a README.md over the limit', append('README.md', 'x' * README_MAX_BYTES), 0),
        ('the commands moved down', replace('README.md', '<!-- doc-test: skip', 'y' * COMMANDS_WITHIN + '\n<!-- doc-test: skip'), 1),
        ('a link to a missing file', append('docs/reference.md', '[gone](gone.md)\n'), 2),
        ('a link to a missing anchor', append('README.md', '[x](docs/reference.md#nowhere)\n'), 2),
        ('a link to a missing anchor in the same page', append('docs/reference.md', '[x](#nowhere)\n'), 2),
        ('a reference-style link to a missing file', append('README.md', '\n[x]: docs/gone.md\n'), 2),
        ('a link out of the repository', append('README.md', '[x](../outside.md)\n'), 2),
        ('a link to a missing page', append('README.md', '[x](docs/other.md)\n'), 2),
        ('an issue number in a user page', append('docs/reference.md', '\nFixed in issue 12, item 3.\n'), 3),
        ('../shared in a user page', append('README.md', '\nUnpack `../shared/pg/x.tar.gz`.\n'), 3),
        ('DESIGN.md cited', append('docs/reference.md', '\nSee DESIGN.md section 5.\n'), 3),
        ('a test path in a user page', append('docs/reference.md', '\n(`test/e2e/t.sh` checks it)\n'), 3),
        ('a test name in a code block of a user page', append('README.md', '\n<!-- doc-test: skip x -->\n```sh\nbash t.sh\n```\n'), 3),
        ('a pg_regress test in a user page', append('docs/reference.md', '\nsee `sql/next.sql`\n'), 3),
        ('an issue number on the evidence page', append('docs/faults.md', '| a crash (issue 8) | kept | 0 |\n'), 3),
        ('a test path in the changelog', append('CHANGELOG.md', '\n- tested by test/e2e/t.sh\n'), 3),
        ('a public function without a row', append('sql/cosid--9.9.sql', 'CREATE OR REPLACE FUNCTION cosid_new(x int) RETURNS int;\n'), 4),
        ('a function named only in prose', lambda base: (append('sql/cosid--9.9.sql', 'CREATE FUNCTION cosid_prose() RETURNS int;\n')(base),
                                                          append('docs/reference.md', '\n`cosid_prose()` is only here.\n')(base)), 4),
        ('a public function of an update script without a row',
         lambda base: (replace('cosid.control', "'9.9'", "'9.10'")(base),
                       append('sql/cosid--9.9--9.10.sql', 'CREATE FUNCTION cosid_newer() RETURNS int;\n')(base)), 4),
        ('a function made again by an update script, without a row',
         lambda base: (replace('cosid.control', "'9.9'", "'9.10'")(base),
                       replace('docs/reference.md', '| `cosid_next() → bigint` | x |\n', '')(base),
                       append('sql/cosid--9.9--9.10.sql', 'DROP FUNCTION cosid_next();\nCREATE FUNCTION cosid_next(x int) RETURNS int;\n')(base)), 4),
        ('a function that an update script drops, without a row',
         lambda base: (replace('cosid.control', "'9.9'", "'9.10'")(base),
                       append('sql/cosid--9.9.sql', 'CREATE FUNCTION cosid_old() RETURNS int;\n')(base),
                       append('sql/cosid--9.9--9.10.sql', 'DROP FUNCTION IF EXISTS cosid_old();\n')(base)), None),
        ('a setting without a row', append('src/pg/settings.cpp', 'DefineCustomBoolVariable("cosid.new_flag", "x");\n'), 5),
        ('a fenced block without a marker', append('docs/reference.md', '\n```sql\nSELECT 2;\n```\n'), 6),
        ('an indented block without a marker', append('README.md', '\n1. step\n   ```sh\n   ls\n   ```\n'), 6),
        ('a marker on the line before the one before', append('README.md', '\n<!-- doc-test: sql -->\n\n```sql\nSELECT 2;\n```\n'), 6),
        ('a skip without its reason', append('README.md', '\n<!-- doc-test: skip -->\n```\nLOG: x\n```\n'), 6),
        ('an unknown kind', append('README.md', '\n<!-- doc-test: maybe -->\n```sql\nSELECT 2;\n```\n'), 6),
        ('a file block without its name', append('README.md', '\n<!-- doc-test: file -->\n```js\nx\n```\n'), 6),
        ('a conf block without its file', append('README.md', '\n<!-- doc-test: conf -->\n```ini\nx = 1\n```\n'), 6),
        ('output on a page no script runs', append('docs/reference.md', '\n<!-- doc-test: output -->\n```\nERROR:  x\n```\n'), 6),
        ('sh blocks on a page no script runs', append('docs/reference.md', '\n<!-- doc-test: sh -->\n```sh\nls\n```\n'), 6),
        ('sh blocks on a page a script runs with --steps',
         lambda base: (append('docs/reference.md', '\n<!-- doc-test: sh -->\n```sh\nls\n```\n')(base),
                       append('test/e2e/t.sh', 'python3 test/meta/doc_blocks.py --steps "$ROOT/docs/reference.md" out\n')(base)), None),
    ]
    results = []
    for what, change, expect in cases:
        base = tempfile.mkdtemp(prefix='check_docs.')
        try:
            tree(base)
            if change:
                change(base)
            got, warnings = check(base)
        finally:
            shutil.rmtree(base)
        failed = [i for i, (ok, _) in enumerate(got) if not ok]
        want = [] if expect is None else [expect]
        ok = failed == want and (expect is not None or not warnings)
        results.append((ok, 'self-test: %s fails %s (failed: %s)'
                        % (what, 'no check and warns of nothing' if expect is None else 'check %d' % expect, failed)))
    return results, []


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    results, warnings = self_test() if sys.argv[1] == '--self-test' else check(os.path.abspath(sys.argv[1]))
    for ok, what in results:
        print(('ok - ' if ok else 'not ok - ') + what)
    for w in warnings:
        print('# warning: ' + w)
    sys.exit(0 if all(ok for ok, _ in results) else 1)
