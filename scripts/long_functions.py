#!/usr/bin/env python3
"""Functions longer than a limit in C++ sources: a brace counter, no compiler needed.

    python3 scripts/long_functions.py [--max N] [--all] FILE|DIR...

Prints one line per function over N lines (80 by default), "path:line: name: L lines", and
exits 1 if there is any; --all prints every function, longest first.  A function's lines run
from the first line of its signature (template line included) to its closing brace.  Comments,
string and character literals and preprocessor lines are blanked first; a brace block is a
function when the text before it (since the last ';', '{' or '}') has a parameter list and no
control keyword.  Lambdas and local classes count as lines of the function around them.
"""
import os
import re
import sys

CONTROL = {"if", "for", "while", "switch", "catch", "do", "else", "try", "return"}
CLASS_KEYS = re.compile(r"\b(class|struct|union|enum)\b")


def blank(text):
    """The source with comments, literals and preprocessor lines replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":  # a preprocessor line, with its continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        m = re.match(r'R"([^(\s]*)\(', text[i:i + 20]) if c == "R" and (i == 0 or not text[i - 1].isalnum()) else None
        if m:
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c in "\"'":
            # a digit separator (1'000) is no character literal
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum() and \
                    re.match(r"[0-9a-fA-F]", text[i - 1]) and re.search(r"\b0?[xX]?[0-9a-fA-F']*$", text[max(0, i - 30):i]):
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c)
            i = j
            continue
        if c == "\n":
            line_start = True
        out.append(c)
        i += 1
    return "".join(out)


def functions(path):
    """(name, first line, last line) of every function defined outside another function."""
    text = blank(open(path, encoding="utf-8").read())
    found = []
    stack = []  # kinds of the open braces: "scope" (namespace, class, extern "C"), "function", "other"
    header_start = 0  # offset where the text before the next brace began
    i = 0
    for i, c in enumerate(text):
        if c in ";}" or (c == "{" and stack and stack[-1][0] != "scope"):
            if c == "}":
                kind, start, name = stack.pop()
                if kind == "function" and "function" not in [k for k, _, _ in stack]:
                    found.append((name, text.count("\n", 0, start) + 1, text.count("\n", 0, i) + 1))
            elif c == "{":
                stack.append(("other", i, ""))
            header_start = i + 1
            continue
        if c != "{":
            continue
        header = text[header_start:i]
        start = header_start + len(header) - len(header.lstrip())
        h = " ".join(header.split())
        if re.search(r"\bnamespace\b", h) or h == 'extern " "':
            kind = "scope"
        elif "(" in h and ")" in h and not re.match(r"(\w+\s*)?=|.*=\s*$", h) and \
                not CLASS_KEYS.search(h.split("(")[0]) and h.split("(")[0].split() and \
                h.split("(")[0].split()[-1] not in CONTROL:
            kind = "function"
        elif CLASS_KEYS.search(h):
            kind = "scope"
        else:
            kind = "other"
        name = h.split("(")[0].split()[-1] if kind == "function" else ""
        stack.append((kind, start, name))
        header_start = i + 1
    return found


def main(argv):
    limit, show_all, paths = 80, False, []
    args = iter(argv)
    for a in args:
        if a == "--max":
            limit = int(next(args))
        elif a == "--all":
            show_all = True
        else:
            paths.append(a)
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                files += [os.path.join(root, f) for f in names if f.endswith((".cpp", ".hpp", ".h", ".cc"))]
        else:
            files.append(p)
    rows = []
    for f in sorted(files):
        for name, first, last in functions(f):
            rows.append((last - first + 1, f, first, name))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    over = [r for r in rows if r[0] > limit]
    for n, f, first, name in (rows if show_all else over):
        print(f"{f}:{first}: {name}: {n} lines")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
