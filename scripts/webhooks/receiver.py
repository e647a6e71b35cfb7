"""A webhook receiver for Keybound's tests: every delivery is checked by the PyPI
`standardwebhooks` library (not Keybound's code), then logged as one JSON line.

    receiver.py PORT SECRET LOG [--fail-first N] [--any-time]

Listens on 127.0.0.1:PORT. A delivery whose signature the library refuses is answered 400 and
logged with "verified": false. A verified one is answered 500 for its first N attempts (by
webhook-id), then 200. --any-time skips the library's 5-minute timestamp tolerance (the tests
that move the server's clock by hours), never the signature check. The log line holds the
headers, the parsed body, the answer and whether it verified.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

port, secret, log_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
fail_first = int(sys.argv[sys.argv.index("--fail-first") + 1]) if "--fail-first" in sys.argv else 0
any_time = "--any-time" in sys.argv

webhook = Webhook(secret)
if any_time:
    # The library's own check of the timestamp, replaced by one that takes any time; the
    # signature is still computed and compared by the library.
    webhook._Webhook__verify_timestamp = lambda text: __import__("datetime").datetime.fromtimestamp(
        float(text), tz=__import__("datetime").timezone.utc)

lock = threading.Lock()
seen: dict[str, int] = {}
log = open(log_path, "a", encoding="utf-8")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keeps connections alive, as Keybound's deliverer may

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        entry = {"headers": {k: v for k, v in headers.items() if k.startswith("webhook-")}}
        try:
            entry["body"] = webhook.verify(body, headers)
            entry["verified"] = True
            with lock:
                seen[headers["webhook-id"]] = seen.get(headers["webhook-id"], 0) + 1
                status = 500 if seen[headers["webhook-id"]] <= fail_first else 200
        except WebhookVerificationError as error:
            entry["verified"] = False
            entry["error"] = str(error)
            status = 400
        entry["status"] = status
        with lock:
            log.write(json.dumps(entry) + "\n")
            log.flush()
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


# A deeper listen queue than the default 5: the deliverer opens several connections at once.
ThreadingHTTPServer.request_queue_size = 128
server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
print("listening", flush=True)
server.serve_forever()
