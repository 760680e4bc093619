// A thread's branches as the session view reads them (the thread detail's `branches`, docs/branches.md):
// the path of a branch, the fork points along it with their alternatives ("2 / 3", like the usual
// chat UIs), where each fork point sits in the conversation, and the branch that "next alternative"
// opens. Pure: no DOM, no requests; the same rules as awaken.ledger.interface.branch_path.

/** One branch of the thread detail (`GET /v1/threads/{id}`'s `branches`). */
export type BranchInfo = {
  branch: number;
  parent: number | null;
  forkSeq: number;
  forkMessageId: string | null;
  createdAt: number;
  runId: string | null;
  reason: string;
  messageCount?: number;
};

/** A place in a path where the conversation went more than one way. */
export type ForkPoint = {
  /** the seq of the last message every alternative shares (0: they share nothing) */
  forkSeq: number;
  /** the id of that message (null for 0) */
  forkMessageId: string | null;
  /** the branches that go on from here, oldest first: the branch holding the message, then each fork */
  alternatives: number[];
  /** the one the path being read goes on with */
  current: number;
};

/** The path of branch ``branch``: ``[branch, maxSeq]`` ranges, oldest first (the last one's maxSeq is
 * Infinity). A message is on the path when some range holds its branch and its seq is at most maxSeq. */
export function branchPath(branches: BranchInfo[], branch: number): [number, number][] {
  const byId = new Map(branches.map((b) => [b.branch, b]));
  const ranges: [number, number][] = [];
  let at: number | null = branch;
  let max = Infinity;
  for (let guard = 0; at !== null && guard <= branches.length; guard++) {
    ranges.push([at, max]);
    const b = byId.get(at);
    if (!b || b.parent === null) break;
    max = b.forkSeq;
    at = b.parent;
  }
  return ranges.reverse();
}

/** The fork points the path of ``view`` passes, in conversation order (by fork seq). */
export function forkPoints(branches: BranchInfo[], view: number): ForkPoint[] {
  const path = branchPath(branches, view);
  const groups = new Map<number, BranchInfo[]>();
  for (const b of branches) {
    if (b.parent === null) continue;
    groups.set(b.forkSeq, [...(groups.get(b.forkSeq) ?? []), b]);
  }
  const points: ForkPoint[] = [];
  for (const [seq, forks] of groups) {
    const holder = forks[0].parent as number; // the branch holding message `seq` (0 for seq 0)
    const at = path.findIndex(([br, max]) => br === holder && seq <= max);
    if (at < 0) continue; // this fork hangs off another path
    const current = path[at][1] === seq && at + 1 < path.length ? path[at + 1][0] : holder;
    points.push({ forkSeq: seq, forkMessageId: forks[0].forkMessageId,
                  alternatives: [holder, ...forks.map((b) => b.branch)].sort((a, b) => a - b), current });
  }
  return points.sort((a, b) => a.forkSeq - b.forkSeq);
}

/** Whether the path of ``branch`` goes on with ``alternative`` past fork seq ``seq``. */
function goesThrough(branches: BranchInfo[], branch: number, alternative: number, seq: number): boolean {
  return branchPath(branches, branch).some(([br, max]) => br === alternative && max > seq);
}

/** The branch to read when a person picks ``alternative`` at fork seq ``seq``: the active branch when
 * its path goes that way, else the newest branch that does (``alternative`` itself at the least). */
export function branchFor(branches: BranchInfo[], active: number, alternative: number, seq: number): number {
  if (goesThrough(branches, active, alternative, seq)) return active;
  const through = branches.map((b) => b.branch).filter((b) => goesThrough(branches, b, alternative, seq));
  return through.length ? Math.max(...through) : alternative;
}

/** Where fork point ``point`` sits among ``items`` (the path's AI SDK UIMessages): the index of the first
 * item after the shared message (``items.length``: nothing follows it on this path). ``ledgerIds``: the
 * path's messages one by one (the AG-UI history's ids), for a shared message inside an assistant turn
 * (a UIMessage holds a whole run's messages under its first one's id); null when not read. */
export function anchorOf(point: ForkPoint, items: { id: string }[], ledgerIds: string[] | null): number {
  if (point.forkSeq === 0 || point.forkMessageId === null) return 0;
  const direct = items.findIndex((m) => m.id === point.forkMessageId);
  if (direct >= 0) return direct + 1;
  if (!ledgerIds) return items.length;
  const shown = new Map(items.map((m, i) => [m.id, i]));
  for (let i = ledgerIds.indexOf(point.forkMessageId) + 1; i > 0 && i < ledgerIds.length; i++) {
    const at = shown.get(ledgerIds[i]);
    if (at !== undefined) return at;
  }
  return items.length;
}

/** The id of the last ledger message of the UIMessage ``id`` (what "fork from here" keeps): ``id``
 * itself for a user message; for an assistant turn, its last message before the next UIMessage. */
export function lastMessageOf(id: string, items: { id: string }[], ledgerIds: string[]): string {
  const at = items.findIndex((m) => m.id === id);
  const next = at >= 0 && at + 1 < items.length ? items[at + 1].id : null;
  const from = ledgerIds.indexOf(id);
  if (from < 0) return id;
  const end = next === null ? ledgerIds.length : ledgerIds.indexOf(next, from + 1);
  return ledgerIds[(end < 0 ? ledgerIds.length : end) - 1];
}
