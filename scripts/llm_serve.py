"""Serve a GGUF model over llama.cpp's OpenAI-compatible HTTP API using the xllamacpp wheel.

Usage: python3 llm_serve.py SITE_DIR MODEL_GGUF TEMPLATE_JINJA PORT
Prints "listening on 127.0.0.1:PORT" once the server accepts requests.
"""
import sys
import time

site, model, template, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, site)
import xllamacpp as xlc  # noqa: E402

params = xlc.CommonParams()
params.model.path = model
params.n_ctx = 4096
params.cpuparams.n_threads = 2
params.use_jinja = True
params.hostnames = ["127.0.0.1"]
params.port = port
with open(template) as f:
    params.chat_template = f.read()
server = xlc.Server(params)
print(f"listening on 127.0.0.1:{port}", flush=True)
while True:
    time.sleep(3600)
