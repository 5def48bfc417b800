"""sass_text_check.py: checks a session of tests/gpu/pc_hot_loop.cu built WITHOUT
-lineinfo, traced with one deep window (engine pc or sass), for the SASS text that
flare's session end gives instructions without a source line (src/disasm; issue 26:
"source file and line where the binary carries line information, the SASS instruction
otherwise").

Fails unless: the sass_text capability is active and no cubin is left in pc_cubins;
hot_chain's samples (pc) or executed instructions (sass) lie >= 99% on instructions
without a line, and >= 99% of those have a text; with pc, hot_chain's most sampled
instruction is a global load (LDG) or reads the register an LDG of hot_chain loads (the
loop is a chain of dependent loads, so warps wait on the instruction that uses the load's
result: on the H200 `IMAD.WIDE.U32 R2, R3, 0x4, R6` after `LDG.E R3, ...`, session 21);
with sass, every hot_chain instruction that executed has a text and one of them is an
LDG. Prints hot_chain's hottest instructions with their texts.

usage: sass_text_check.py SESSION pc|sass
       sass_text_check.py --self-test
Must never write to the session.
"""
import re
import sqlite3
import sys


def operands(text):
    """An instruction's opcode and its operands' registers: 'IMAD.WIDE.U32 R2, R3, 0x4, R6'
    -> ('IMAD.WIDE.U32', ['R2', 'R3', 'R6']) (a predicate '@P0' first is left out)."""
    words = text.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    if not words:
        return "", []
    registers = re.findall(r"\bR\d+\b", " ".join(words[1:]))
    return words[0], registers


def waits_on_a_load(hottest, texts):
    """Whether hottest is an LDG, or reads (as a source) a register an LDG writes."""
    opcode, registers = operands(hottest)
    if opcode.startswith("LDG"):
        return True
    loaded = {operands(t)[1][0] for t in texts if operands(t)[0].startswith("LDG") and operands(t)[1]}
    return bool(loaded & set(registers[1:]))


def self_test():
    texts = ["IMAD.WIDE.U32 R2, R3, 0x4, R6", "@!P0 BRA 0x100", "LDG.E R3, desc[UR6][R2.64]"]
    assert waits_on_a_load(texts[0], texts)
    assert waits_on_a_load(texts[2], texts)
    assert not waits_on_a_load(texts[1], texts)
    assert not waits_on_a_load("IMAD.WIDE.U32 R3, R2, 0x4, R6", texts)  # writes R3, reads none
    assert operands("@!P0 BRA 0x100") == ("BRA", [])
    print("sass_text_check self-test: PASS")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if len(argv) != 2 or argv[1] not in ("pc", "sass"):
        print(__doc__.split("\n\n")[-2], file=sys.stderr)
        return 2
    session, engine = argv
    db = sqlite3.connect(f"file:{session}/session.db?mode=ro", uri=True)
    problems = []
    capability = db.execute("SELECT status, reason FROM capabilities WHERE feature = 'sass_text'").fetchall()
    print(f"sass_text: {capability}")
    if not capability or any(status != "active" for status, _ in capability):
        problems.append(f"sass_text is not active: {capability}")
    left = db.execute("SELECT count(*) FROM pc_cubins").fetchone()[0]
    if left:
        problems.append(f"{left} cubins left undisassembled")
    if engine == "pc":
        rows = db.execute(
            "SELECT p.pc_offset, SUM(p.samples), l.line IS NOT NULL, i.sass FROM pc_samples p "
            "JOIN names n ON n.id = p.name_id LEFT JOIN pc_lines l ON l.pid = p.pid AND "
            "l.name_id = p.name_id AND l.pc_offset = p.pc_offset LEFT JOIN pc_instructions i ON "
            "i.pid = p.pid AND i.name_id = p.name_id AND i.pc_offset = p.pc_offset "
            "WHERE n.name = 'hot_chain' GROUP BY p.pc_offset ORDER BY 2 DESC").fetchall()
    else:
        rows = db.execute(
            "SELECT s.pc_offset, s.value, l.line IS NOT NULL, i.sass FROM sass_metrics s "
            "JOIN names n ON n.id = s.name_id LEFT JOIN pc_lines l ON l.pid = s.pid AND "
            "l.name_id = s.name_id AND l.pc_offset = s.pc_offset LEFT JOIN pc_instructions i ON "
            "i.pid = s.pid AND i.name_id = s.name_id AND i.pc_offset = s.pc_offset "
            "WHERE n.name = 'hot_chain' AND s.metric = 'smsp__sass_inst_executed' AND s.value > 0 "
            "ORDER BY s.value DESC").fetchall()
    total = sum(r[1] for r in rows)
    no_line = sum(r[1] for r in rows if not r[2])
    with_text = sum(r[1] for r in rows if not r[2] and r[3])
    print(f"hot_chain ({engine}): {len(rows)} instructions, {total:,} "
          f"{'samples' if engine == 'pc' else 'executed'}; {no_line:,} without a line, "
          f"{with_text:,} of them with a text")
    for offset, value, has_line, text in rows[:8]:
        print(f"  +0x{offset:x} {value:>12,} {'(line)' if has_line else ''} {text or '-'}")
    if total == 0:
        problems.append("hot_chain has nothing in the window")
    elif no_line < 0.99 * total:
        problems.append(f"only {no_line / total:.1%} without a line (built without -lineinfo?)")
    elif with_text < 0.99 * no_line:
        problems.append(f"only {with_text / no_line:.1%} of those have a text")
    texts = [r[3] or "" for r in rows]
    if engine == "pc" and texts and not waits_on_a_load(texts[0], texts):
        problems.append(f"the hottest instruction neither loads nor uses a load: {texts[0]!r}")
    if engine == "sass":
        if any(not t for t in texts):
            problems.append("an executed instruction has no text")
        if not any(t.startswith("LDG") or " LDG" in t for t in texts):
            problems.append("no LDG among hot_chain's instructions")
    for problem in problems:
        print(f"FAIL: {problem}")
    print("sass text check: " + ("FAIL" if problems else "PASS"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
