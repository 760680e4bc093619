"""The console chat's status line (console/src/status.ts): a failure shown in red beside the badge
makes it say ``error``, never ``ready``; the module is bundled with the console's own esbuild and run
in Node, so what is tested is the shipped logic."""

from __future__ import annotations

import json
import shutil
import subprocess

from tests.http.test_console_build import CONSOLE

RUN = """
import * as esbuild from "esbuild";
const built = await esbuild.build({ entryPoints: ["src/status.ts"], bundle: true, write: false, format: "esm" });
const { shownStatus } = await import("data:text/javascript," + encodeURIComponent(built.outputFiles[0].text));
const cases = JSON.parse(process.argv[1]);
console.log(JSON.stringify(cases.map(([status, failure]) => shownStatus(status, failure))));
"""


def test_a_chat_showing_an_error_says_error_not_ready():
    node = shutil.which("node")
    assert node, "node is needed to run the console's status logic"
    cases = [
        ("ready", "RUN_ERROR: the model failed"),  # AG-UI: the run ended with RUN_ERROR, the chat can send
        ("error", "MODEL_ERROR: the model failed"),  # AI SDK: useChat's own error status
        ("error", ""),  # an error status with nothing to show
        ("ready", ""),
        ("streaming", ""),
        ("submitted", ""),
        ("streaming", "old failure"),  # a new request streams: its status shows (the error is cleared on send)
    ]
    out = subprocess.run([node, "--input-type=module", "-e", RUN, json.dumps(cases)], cwd=CONSOLE,
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == ["error", "error", "ready", "ready", "streaming", "submitted", "streaming"]
