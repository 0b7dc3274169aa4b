#!/usr/bin/env python3
"""Checks the book (docs/) and the README: every relative link and
`{{#include}}` points at a file that exists, every `#anchor` into a page
names one of its headings, and SUMMARY.md lists every page (and only
pages that exist). Prints each broken link; exits 1 if any."""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SRC = os.path.join(ROOT, "docs", "src")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
INCLUDE = re.compile(r"\{\{#include\s+([^}\s]+)\s*\}\}")


def anchors(path):
    """mdBook's heading ids: lower case, punctuation dropped, spaces to -."""
    out, fence = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"^#{1,6}\s+(.*)$", line)
        if m:
            text = re.sub(r"[`*_]", "", m.group(1).strip()).lower()
            out.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return out


def strip_code(text):
    """The text without fenced blocks and inline code (links there are examples)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def check_file(path, errors):
    text = strip_code(open(path, encoding="utf-8").read())
    base = os.path.dirname(path)
    for target in LINK.findall(text) + INCLUDE.findall(open(path, encoding="utf-8").read()):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(base, file)) if file else path
        where = os.path.relpath(path, ROOT)
        if not os.path.exists(dest):
            errors.append(f"{where}: {target}: no such file")
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            errors.append(f"{where}: {target}: no heading #{anchor}")


def main():
    errors = []
    pages = []
    for d, _, files in os.walk(SRC):
        pages += [os.path.join(d, f) for f in files if f.endswith(".md")]
    for p in pages + [os.path.join(ROOT, "README.md")]:
        check_file(p, errors)
    summary = os.path.join(SRC, "SUMMARY.md")
    listed = {os.path.normpath(os.path.join(SRC, t)) for t in LINK.findall(open(summary).read())}
    for p in pages:
        if p != summary and p not in listed:
            errors.append(f"{os.path.relpath(p, ROOT)}: not in SUMMARY.md")
    for e in errors:
        print(e)
    print(f"docs: {len(pages)} pages, {len(errors)} broken link(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
