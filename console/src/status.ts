// What the chat's status line says. A chat is "ready" when it can send, but one whose last request
// ended with an error shown beside the badge says "error": never "ready" next to a red failure.

/** The status to show for the chat's own `status` (ai's ChatStatus, or the AG-UI run's) when
 * `failure` (the text shown in red, or "") is beside it. */
export function shownStatus(status: string, failure: string): string {
  if (failure && (status === "ready" || status === "error")) return "error";
  if (!failure && status === "error") return "ready"; // nothing to point at: the chat can send
  return status;
}
