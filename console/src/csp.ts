// Imported first by main.ts, so that it runs before any client library builds its schemas.
//
// The page's Content-Security-Policy (script-src 'self', awaken/framing.py) forbids code built from
// strings. zod (the client libraries validate every event with it) probes for that with
// `new Function("")` as it builds its object schemas, unless told to stay "jitless": the probe would be
// refused, and reported as a CSP violation.
import { config } from "zod/v4/core";

config({ jitless: true });
