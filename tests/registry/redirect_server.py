#!/usr/bin/env python3
"""An HTTP server on 127.0.0.1 that answers every GET and HEAD with 307 to the same path on
another server (a registry that serves its manifests and blobs from elsewhere, as registries
behind a CDN do), for the registry tests.

    redirect_server.py --to http://127.0.0.1:PORT --port-file FILE

Writes the port it listens on to FILE, then serves until killed; logs each request on stderr."""
import argparse
import http.server
import os


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--to", required=True)
    p.add_argument("--port-file", required=True)
    args = p.parse_args()

    class Handler(http.server.BaseHTTPRequestHandler):
        def redirect(self):
            self.send_response(307)
            self.send_header("Location", args.to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = redirect
        do_HEAD = redirect

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
