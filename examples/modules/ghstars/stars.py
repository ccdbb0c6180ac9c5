#!/usr/bin/python3
"""stars: print and return the star count of inputs.repo (owner/name).

urllib reads HTTPS_PROXY from the environment, which warden points at the
bridge inside the jail; the engine resolves api.github.com and decides.
A refusal arrives as an HTTP 403 whose reason says why.
"""
import json
import re
import subprocess
import sys
import urllib.error
import urllib.request

repo = subprocess.run(["warden", "hook", "context", "inputs.repo"], check=True,
                      capture_output=True, text=True).stdout.strip()
if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo):
    sys.exit(f"repo must be owner/name, got {repo!r}")

req = urllib.request.Request(f"https://api.github.com/repos/{repo}",
                             headers={"User-Agent": "warden-ghstars"})
try:
    with urllib.request.urlopen(req, timeout=60) as resp:
        stars = json.load(resp)["stargazers_count"]
except urllib.error.URLError as e:
    sys.exit(f"api.github.com: {e.reason}")

print(f"{repo} has {stars} stars")
subprocess.run(["warden", "hook", "result", json.dumps({"stars": stars})], check=True)
