"""Stream one agent run from Awaken over AG-UI with httpx, then read the thread's history back.

    python client.py "What is 6*7?"                      # a new thread on the default agent
    python client.py --thread t1 --agent assistant "/call calculator {\"expression\": \"6*7\"}"
    AWAKEN_TOKEN=... python client.py --server https://agents.example.com "hello"

It prints the answer as it streams, each tool call and its result, and how the run ended; then the
thread as the server keeps it. Needs only httpx (``pip install httpx``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import httpx


def events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The AG-UI events of an SSE response: one JSON object per ``data:`` line."""
    for line in response.iter_lines():
        if line.startswith("data: "):
            yield json.loads(line[len("data: "):])


def run(client: httpx.Client, agent: str, thread: str, text: str) -> str:
    """Stream one run saying ``text``; print as it goes; return how it ended."""
    body = {"threadId": thread, "runId": f"run-{uuid.uuid4().hex[:12]}", "state": {}, "tools": [], "context": [],
            "forwardedProps": {}, "messages": [{"id": f"msg-{uuid.uuid4().hex[:12]}", "role": "user", "content": text}]}
    with client.stream("POST", f"/v1/ag-ui/agents/{agent}", json=body,
                       headers={"accept": "text/event-stream"}) as response:
        if response.status_code != 200:
            response.read()
            raise SystemExit(f"refused: HTTP {response.status_code} {response.text}")
        names: dict[str, str] = {}
        for event in events(response):
            kind = event["type"]
            if kind == "TEXT_MESSAGE_CONTENT":
                print(event["delta"], end="", flush=True)
            elif kind == "TEXT_MESSAGE_END":
                print()
            elif kind == "TOOL_CALL_START":
                names[event["toolCallId"]] = event["toolCallName"]
            elif kind == "TOOL_CALL_END":
                print(f"[calling {names[event['toolCallId']]}]")
            elif kind == "CUSTOM" and event["name"] == "tool_progress":
                print(f"[{event['value']['toolName']}: {json.dumps(event['value']['data'])}]")
            elif kind == "TOOL_CALL_RESULT":
                print(f"[{names.get(event['toolCallId'], 'tool')} returned {event['content']}]")
            elif kind == "RUN_FINISHED":
                return "finished"
            elif kind == "RUN_ERROR":
                return f"error {event.get('code', '')}: {event['message']}"
    return "the stream ended without a terminal event"


def history(client: httpx.Client, thread: str) -> list[dict[str, Any]]:
    """Every committed message of the thread, page by page (oldest first)."""
    items: list[dict[str, Any]] = []
    cursor = ""
    while True:
        page = client.get(f"/v1/ag-ui/threads/{thread}/messages",
                          params={"limit": 50, **({"cursor": cursor} if cursor else {})})
        page.raise_for_status()
        body = page.json()
        if not body["items"]:
            return items
        known = {m["id"]: i for i, m in enumerate(items)}
        for item in body["items"]:  # a page may send a message again, whole
            if item["id"] in known:
                items[known[item["id"]]] = item
            else:
                items.append(item)
        cursor = body["cursor"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("text", help="what to say")
    parser.add_argument("--server", default=os.environ.get("AWAKEN_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--agent", default="assistant")
    parser.add_argument("--thread", default=f"py-{uuid.uuid4().hex[:12]}")
    args = parser.parse_args(argv)
    token = os.environ.get("AWAKEN_TOKEN")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=args.server, headers=headers, timeout=httpx.Timeout(10, read=300)) as client:
        print(f"-- run ended: {run(client, args.agent, args.thread, args.text)}")
        print(f"-- thread {args.thread}:")
        for message in history(client, args.thread):
            content = message.get("content") or ", ".join(c["function"]["name"] for c in message.get("toolCalls", []))
            print(f"{message['role']}: {content}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
