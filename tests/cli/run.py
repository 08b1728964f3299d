"""Runs each tests/cli/<suite>/<case>.sh in a fresh scratch directory with a `ckptconv`
wrapper first on PATH (running the real binary, under $EXEC_PREFIX if set, e.g. valgrind),
and checks its exit status and output against sibling files:

  <case>.exit            expected exit status (default 0)
  <case>.stdout.exact    stdout must equal this file
  <case>.stdout.glob     each line is a shell glob ('*' and '?'; '[' is literal) for one
                         output line; a line "..." skips any number of lines
  <case>.stderr.exact / <case>.stderr.glob   the same for stderr
Without an expectation file, that stream is not checked. A suite whose directory holds a
`requires-format` file (format names, one per line) is skipped, and said to be, when the
binary was built without one of them (`ckptconv --help` lists the formats it has).
A filter ending in "/" selects that suite alone (ctest runs each suite as cli.<suite>); any
other filter, the cases whose "<suite>/<case>.sh" holds it. Exit status: 0 when every case
passed, 1 when one failed or none matched, 77 when every case matched was skipped.
Options: --set-exact-output rewrites the .exact files from the actual output;
--preserve keeps the scratch directories. The environment gives each case TESTDATA
(the repository's testdata/) and CLI_DIR (its suite directory)."""
import fnmatch
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SKIPPED = 77  # every case skipped: ctest's SKIP_RETURN_CODE
ROOT = os.path.dirname(os.path.dirname(HERE))


def glob_match(patterns, lines):
    """True if `lines` match `patterns` line by line, where a "..." pattern skips any run."""
    if not patterns:
        return not lines
    head, rest = patterns[0], patterns[1:]
    if head == "...":
        return any(glob_match(rest, lines[i:]) for i in range(len(lines) + 1))
    literal_brackets = head.replace("[", "[[]")
    return bool(lines) and fnmatch.fnmatchcase(lines[0], literal_brackets) and glob_match(rest, lines[1:])


def check_stream(case, name, actual, set_exact):
    exact, glob = f"{case}.{name}.exact", f"{case}.{name}.glob"
    if os.path.exists(exact):
        if set_exact:
            with open(exact, "w") as f:
                f.write(actual)
            return None
        with open(exact) as f:
            want = f.read()
        if want != actual:
            return f"{name} differs from {os.path.basename(exact)}:\n--- expected\n{want}--- actual\n{actual}"
    elif os.path.exists(glob):
        with open(glob) as f:
            patterns = f.read().splitlines()
        if not glob_match(patterns, actual.splitlines()):
            return f"{name} does not match {os.path.basename(glob)}:\n--- patterns\n" + \
                "\n".join(patterns) + f"\n--- actual\n{actual}"
    return None


def built_formats(binary):
    """The format names on the 'formats:' line of `ckptconv --help`."""
    out = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("formats:"):
            return {item.split(" (")[0].strip() for item in line[len("formats:"):].split("),")}
    return set()


def missing_format(sdir, have):
    """The first format the suite needs that the build lacks, or None."""
    need = os.path.join(sdir, "requires-format")
    if not os.path.exists(need):
        return None
    with open(need) as f:
        for name in f.read().split():
            if name not in have:
                return name
    return None


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    set_exact = "--set-exact-output" in sys.argv
    preserve = "--preserve" in sys.argv
    if not args:
        print("usage: run.py CKPTCONV [filter] [--set-exact-output] [--preserve]")
        return 2
    binary = os.path.abspath(args[0])
    pattern = args[1] if len(args) > 1 else ""
    cases = []
    have = built_formats(binary)
    skipped = 0
    for suite in sorted(os.listdir(HERE)):
        sdir = os.path.join(HERE, suite)
        if not os.path.isdir(sdir) or suite.startswith(("_", ".")):
            continue
        lacking = missing_format(sdir, have)
        for f in sorted(os.listdir(sdir)):
            if f.endswith(".sh") and (suite == pattern[:-1] if pattern.endswith("/") else pattern in f"{suite}/{f}"):
                if lacking:
                    print(f"skip {suite}/{f} (this build has no {lacking} format)")
                    skipped += 1
                else:
                    cases.append((suite, os.path.join(sdir, f)))
    passed = failed = 0
    for suite, script in cases:
        case = script[:-3]
        scratch = tempfile.mkdtemp(prefix="ckpt-cli-")
        bindir = os.path.join(scratch, ".bin")
        os.mkdir(bindir)
        wrapper = os.path.join(bindir, "ckptconv")
        with open(wrapper, "w") as f:
            f.write(f'#!/bin/sh\nexec ${{EXEC_PREFIX:-}} "{binary}" "$@"\n')
        os.chmod(wrapper, 0o755)
        env = dict(os.environ, PATH=bindir + os.pathsep + os.environ["PATH"],
                   TESTDATA=os.path.join(ROOT, "testdata"), CLI_DIR=os.path.dirname(script))
        # the crash tests' and the full-disk tests' preloads, built beside the binary (ctest also sets them)
        env.setdefault("CKPT_CUT_SHORT", os.path.join(os.path.dirname(binary), "tests", "libckpt_cut_short.so"))
        env.setdefault("CKPT_DISK_FULL", os.path.join(os.path.dirname(binary), "tests", "libckpt_disk_full.so"))
        proc = subprocess.run(["bash", script], cwd=scratch, env=env, capture_output=True, text=True,
                              timeout=300)
        want_exit = 0
        if os.path.exists(case + ".exit"):
            with open(case + ".exit") as f:
                want_exit = int(f.read().strip())
        problems = []
        if proc.returncode != want_exit:
            problems.append(f"exit status {proc.returncode}, expected {want_exit}")
        for name, actual in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            p = check_stream(case, name, actual, set_exact)
            if p:
                problems.append(p)
        label = f"{suite}/{os.path.basename(script)}"
        if problems:
            failed += 1
            print(f"FAIL {label}")
            for p in problems:
                print("  " + p.replace("\n", "\n  "))
            if not proc.stdout and not proc.stderr:
                print("  (no output)")
        else:
            passed += 1
            print(f"ok   {label}")
        if preserve or problems:
            print(f"  scratch kept: {scratch}") if preserve else None
        if not preserve:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    if not cases and skipped:
        return SKIPPED
    return 1 if failed or not cases else 0


if __name__ == "__main__":
    sys.exit(main())
