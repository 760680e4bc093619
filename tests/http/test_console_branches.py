"""The console's reading of a thread's branches (console/src/branches.ts): a branch's path is the ledger's
(``awaken.ledger.interface.branch_path``), the fork points along it count their alternatives as the usual
chat UIs do ("2 / 3"), "previous / next" opens the branch a person expects, a fork point inside an
assistant turn sits before the message after that turn, and "fork from here" on an answer keeps all of its
turn. The module is bundled with the console's own esbuild and run in Node: what is tested is the shipped
logic."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from awaken.ledger.interface import Branch, branch_path
from tests.http.test_console_build import CONSOLE

RUN = """
import * as esbuild from "esbuild";
const built = await esbuild.build({ entryPoints: ["src/branches.ts"], bundle: true, write: false, format: "esm" });
const b = await import("data:text/javascript," + encodeURIComponent(built.outputFiles[0].text));
const { branches, items, ledgerIds } = JSON.parse(process.argv[1]);
const inf = (path) => path.map(([br, max]) => [br, max === Infinity ? "inf" : max]);
console.log(JSON.stringify({
  paths: branches.map((x) => inf(b.branchPath(branches, x.branch))),
  points: b.forkPoints(branches, 3),
  pointsOf1: b.forkPoints(branches, 1).map((p) => [p.forkSeq, p.current]),
  chosen: [b.branchFor(branches, 3, 0, 1), b.branchFor(branches, 3, 4, 0), b.branchFor(branches, 3, 2, 6),
           b.branchFor(branches, 3, 0, 0), b.branchFor(branches, 1, 0, 3)],
  anchors: [[4, "t1"], [3, "u2"], [0, null], [4, "t1", "unread"]].map(([forkSeq, id, unread]) =>
    b.anchorOf({ forkSeq, forkMessageId: id, alternatives: [], current: 0 }, items, unread ? null : ledgerIds)),
  last: ["a1", "a2", "u1"].map((id) => b.lastMessageOf(id, items, ledgerIds)),
}));
"""

#: the tree the useChat test builds, and an edit of the very first message: 1 regenerates the answer to
#: message 3, 2 the answer to message 1, 3 edits the message after 6 (on branch 2), 4 edits message 1
TREE = [(0, None, 0, "root"), (1, 0, 3, "regenerate"), (2, 0, 1, "regenerate"), (3, 2, 6, "edit"), (4, 0, 0, "edit")]


def test_the_console_reads_branches_as_the_ledger_does():
    node = shutil.which("node")
    assert node, "node is needed to run the console's branch logic"
    branches = [{"branch": b, "parent": p, "forkSeq": s, "forkMessageId": f"m{s}" if s else None, "createdAt": 0,
                 "runId": None, "reason": r} for b, p, s, r in TREE]
    items = [{"id": i} for i in ("u1", "a1", "u2", "a2")]  # an assistant turn of three messages: a1, t1, a1b
    ledger_ids = ["u1", "a1", "t1", "a1b", "u2", "a2"]
    out = json.loads(subprocess.run(
        [node, "--input-type=module", "-e", RUN, json.dumps({"branches": branches, "items": items,
                                                            "ledgerIds": ledger_ids})],
        cwd=CONSOLE, capture_output=True, text=True, check=True).stdout)
    ledger = [Branch(b, p, s, 0, None, r) for b, p, s, r in TREE]
    assert out["paths"] == [[[br, "inf" if mx == sys.maxsize else mx] for br, mx in branch_path(ledger, b)]
                            for b, *_ in TREE]
    # on branch 3's path: the first message had an edit (1 / 2), the answer to it a regenerate (2 / 2),
    # the message after 6 an edit (2 / 2); the regenerate of message 3 hangs off another path
    assert out["points"] == [
        {"forkSeq": 0, "forkMessageId": None, "alternatives": [0, 4], "current": 0},
        {"forkSeq": 1, "forkMessageId": "m1", "alternatives": [0, 2], "current": 2},
        {"forkSeq": 6, "forkMessageId": "m6", "alternatives": [2, 3], "current": 3}]
    assert out["pointsOf1"] == [[0, 0], [1, 0], [3, 1]]
    # "previous" from 2 at 1: branch 0 went on past 1, and so did 1, the newer; the active branch when it goes
    # that way; from 1 at 3, only branch 0 did
    assert out["chosen"] == [1, 4, 2, 3, 0]
    # a fork after t1 (inside the turn a1 starts) sits before u2; after u2, before a2; at 0, first; without the
    # ledger's ids, at the end
    assert out["anchors"] == [2, 3, 0, 4]
    assert out["last"] == ["a1b", "a2", "u1"]
