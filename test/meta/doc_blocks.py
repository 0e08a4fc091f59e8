#!/usr/bin/env python3
"""Extracts the code blocks of the docs that are marked to run, so that the test command runs
them as a reader would (test/e2e/doc_blocks.sh).

A block runs when the line before its fence is the marker
    <!-- doc-test: sql -->
(an HTML comment: not shown on a rendered page).  The SQL blocks of a page run in order, in
one psql session, with ON_ERROR_STOP: each is written as the reader copies it.

Usage: doc_blocks.py ROOT OUTDIR
  writes OUTDIR/NN-<page>.sql for each page with marked blocks (README.md first, then docs/ in
  name order) and prints one line per page: "<file> <page> <blocks>"."""
import glob, os, re, sys

MARKER = re.compile(r'^\s*<!--\s*doc-test:\s*(\w+)\s*-->\s*$')
FENCE = re.compile(r'^(\s*)(```|~~~)\s*(\w*)\s*$')


def blocks(path):
    """[(kind, first line number, text)] of the marked blocks of a page."""
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
        out.append((m.group(1), i + 3, '\n'.join(body)))
        i = j + 1
    return out


def main(root, outdir):
    pages = ['README.md'] + sorted('docs/' + os.path.basename(p) for p in glob.glob(os.path.join(root, 'docs', '*.md')))
    os.makedirs(outdir, exist_ok=True)
    n = 0
    for page in pages:
        found = [b for b in blocks(os.path.join(root, page)) if b[0] == 'sql']
        if not found:
            continue
        n += 1
        name = os.path.join(outdir, '%02d-%s.sql' % (n, os.path.basename(page)[:-3]))
        with open(name, 'w') as f:
            f.write('\\set ON_ERROR_STOP 1\n')
            for _, line, text in found:
                f.write('\\echo ==> %s:%d\n%s\n' % (page, line, text))
        print(name, page, len(found))


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
