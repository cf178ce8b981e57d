#!/usr/bin/env python3
"""A token server for the registry tests' Bearer flow: Docker's token authentication
specification (distribution/docs/spec/auth/token.md), as docker-registry's `auth: token`
expects it. Debian packages no token server, so this is the smallest one that follows the spec
with the standard library and the openssl command: Basic credentials in, an RS256 JWT out whose
`kid` is the libtrust key ID of the certificate the registry trusts (rootcertbundle), granting
the actions asked for in `scope`.

usage: token_server.py --key KEY.pem --issuer ISSUER --user U --password P --port-file FILE
Writes the port it listens on (127.0.0.1) to FILE, then serves until killed. Every request is
logged on stderr, so the test can see the flow happened."""
import argparse
import base64
import hashlib
import http.server
import json
import subprocess
import sys
import time
import urllib.parse


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def libtrust_key_id(key_path: str) -> str:
    # libtrust: SHA-256 of the DER SubjectPublicKeyInfo, first 240 bits, base32, groups of 4.
    der = subprocess.run(["openssl", "pkey", "-in", key_path, "-pubout", "-outform", "DER"],
                         check=True, capture_output=True).stdout
    encoded = base64.b32encode(hashlib.sha256(der).digest()[:30]).decode().rstrip("=")
    return ":".join(encoded[i:i + 4] for i in range(0, len(encoded), 4))


def main() -> None:
    p = argparse.ArgumentParser()
    for name in ("--key", "--issuer", "--user", "--password", "--port-file"):
        p.add_argument(name, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--error-message", default="bad or no credentials")  # what a 401 says (a hostile one, in a test)
    args = p.parse_args()
    kid = libtrust_key_id(args.key)
    expected = "Basic " + base64.b64encode(f"{args.user}:{args.password}".encode()).decode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            url = urllib.parse.urlparse(self.path)
            query = urllib.parse.parse_qs(url.query)
            if url.path != "/token":
                return self.reply(404, {"errors": [{"code": "NOT_FOUND"}]})
            # Whether credentials arrived at all: a client must not send them to a realm over
            # plain http on another host.
            sys.stderr.write("authorization: %s\n" % ("present" if self.headers.get("Authorization") else "absent"))
            if self.headers.get("Authorization") != expected:
                return self.reply(401, {"errors": [{"code": "UNAUTHORIZED", "message": args.error_message}]})
            access = []
            for scope in query.get("scope", []):
                kind, name, actions = scope.split(":")
                access.append({"type": kind, "name": name, "actions": actions.split(",")})
            now = int(time.time())
            claims = {"iss": args.issuer, "sub": args.user, "aud": query.get("service", [""])[0],
                      "exp": now + 300, "nbf": now - 10, "iat": now, "jti": b64url(hashlib.sha256(str(time.time_ns()).encode()).digest()[:12]),
                      "access": access}
            header = {"typ": "JWT", "alg": "RS256", "kid": kid}
            signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
            signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", args.key], input=signing_input.encode(),
                                       check=True, capture_output=True).stdout
            token = f"{signing_input}.{b64url(signature)}"
            self.reply(200, {"token": token, "access_token": token, "expires_in": 300})

        def reply(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = http.server.ThreadingHTTPServer((args.host, 0), Handler)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.rename(args.port_file + ".tmp", args.port_file)
    sys.stderr.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
