#!/usr/bin/env python3
"""Extracts the code blocks of the docs that are marked to run, so that the test command runs
them as a reader would (test/e2e/doc_blocks.sh, test/e2e/applications.sh).

A block runs when the line before its fence is a marker (an HTML comment: not shown on a
rendered page):
    <!-- doc-test: sql -->          SQL, run by psql as the postgres user
    <!-- doc-test: file NAME -->    a file the reader saves as NAME (a relative path)
    <!-- doc-test: sh -->           shell commands the reader runs, in the directory of those files
    <!-- doc-test: env -->          `export NAME=value` lines the reader runs first (a test may
                                    point them at its own server)
    <!-- doc-test: conf NAME -->    lines the reader adds to the configuration file NAME
                                    (postgresql.conf, pg_hba.conf): a test adds them to its server's
    <!-- doc-test: output -->       what PostgreSQL prints (a result, a log line, an error): not
                                    run; the page's test compares it with what its server printed
A block that cannot run here says so, and why, in a few words:
    <!-- doc-test: skip REASON -->  e.g. "needs two hosts", "PostgreSQL's output, not a command"
test/meta/check_docs.py fails on a fenced block of README.md or docs/*.md without a marker.
The SQL blocks of a page run in order, in one psql session, with ON_ERROR_STOP: each is
written as the reader copies it.

Usage: doc_blocks.py ROOT OUTDIR
  writes OUTDIR/NN-<page>.sql for each page whose marked blocks are all SQL (README.md first,
  then docs/ in name order) and prints one line per page: "<file> <page> <blocks>".  A page
  with blocks of another kind (file, sh, env, conf, output) is left to its own test, which runs all its blocks in order:
       doc_blocks.py --steps PAGE OUTDIR
  writes every marked block of PAGE, in page order, to OUTDIR/NN.<kind> and prints one line
  per block: "<file> <kind> <argument or -> <line of its first line in PAGE>"."""
import glob, os, re, sys

MARKER = re.compile(r'^\s*<!--\s*doc-test:\s*(\w+)(?:\s+((?:(?!-->).)*?))?\s*-->\s*$')
FENCE = re.compile(r'^(\s*)(```|~~~)\s*([\w-]*)\s*$')
KINDS = ('sql', 'file', 'sh', 'env', 'conf', 'output', 'skip')  # skip: not run; its argument says why


def fences(path):
    """[(first line number of the fence, marker kind or None, marker argument or None)] of
    every fenced block of a page, marked or not."""
    lines = open(path, encoding='utf-8').read().split('\n')
    out, i = [], 0
    while i < len(lines):
        f = re.match(r'^(\s*)(```|~~~)', lines[i])
        if not f:
            i += 1
            continue
        m = MARKER.match(lines[i - 1]) if i > 0 else None
        out.append((i + 1, m.group(1) if m else None, m.group(2) if m else None))
        j = i + 1
        while j < len(lines) and lines[j].strip() != f.group(2):
            j += 1
        i = j + 1
    return out


def blocks(path):
    """[(kind, argument or None, first line number, text)] of the blocks of a page marked to
    run (not those marked skip)."""
    lines = open(path, encoding='utf-8').read().split('\n')
    out, i = [], 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        f = FENCE.match(lines[i + 1]) if m and i + 1 < len(lines) else None
        if not f:
            i += 1
            continue
        indent, fence, body, j = f.group(1), f.group(2), [], i + 2
        while j < len(lines) and not (lines[j].strip() == fence):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        if m.group(1) != 'skip':
            out.append((m.group(1), m.group(2), i + 3, '\n'.join(body)))
        i = j + 1
    return out


def main(root, outdir):
    pages = ['README.md'] + sorted('docs/' + os.path.basename(p) for p in glob.glob(os.path.join(root, 'docs', '*.md')))
    os.makedirs(outdir, exist_ok=True)
    n = 0
    for page in pages:
        marked = blocks(os.path.join(root, page))
        found = [b for b in marked if b[0] == 'sql']
        if not found or len(found) < len(marked):  # a page with other blocks runs with --steps
            continue
        n += 1
        name = os.path.join(outdir, '%02d-%s.sql' % (n, os.path.basename(page)[:-3]))
        with open(name, 'w') as f:
            f.write('\\set ON_ERROR_STOP 1\n')
            for _, _, line, text in found:
                f.write('\\echo ==> %s:%d\n%s\n' % (page, line, text))
        print(name, page, len(found))


def steps(page, outdir):
    os.makedirs(outdir, exist_ok=True)
    for n, (kind, arg, line, text) in enumerate(blocks(page), 1):
        if arg is not None and (arg.startswith('/') or '..' in arg.split('/')):
            sys.exit('%s:%d: a file block names a relative path inside the reader\'s directory, not %s' % (page, line, arg))
        name = os.path.join(outdir, '%02d.%s' % (n, kind))
        with open(name, 'w') as f:
            f.write(text + '\n')
        print(name, kind, arg or '-', line)


if __name__ == '__main__':
    if len(sys.argv) == 4 and sys.argv[1] == '--steps':
        steps(*sys.argv[2:])
    elif len(sys.argv) == 3:
        main(*sys.argv[1:])
    else:
        sys.exit(__doc__)
