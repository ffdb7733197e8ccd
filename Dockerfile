# infermeter container image: build with the dev toolchain, run with production dependencies
# only, as the unprivileged `node` user. (Written to the standard pattern; the development
# machines have no Docker engine, so it has not been built there.)
FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
# --ignore-scripts: the image already has Node 24, the node@24 dev dependency is not needed.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY src ./src
RUN npm run build && npm prune --omit=dev --ignore-scripts

FROM node:24-slim
# In a container the address is the pod's own: listening on every address is the norm, so it is
# allowed here explicitly (infermeter refuses it otherwise). Lock the metrics port down with
# INFERMETER_METRICS_TOKEN and a network policy.
ENV NODE_ENV=production \
    INFERMETER_HOST=0.0.0.0 \
    INFERMETER_MANAGEMENT_HOST=0.0.0.0 \
    INFERMETER_ALLOW_ALL_ZERO_IP=1
WORKDIR /app
COPY --from=build --chown=root:root /app/package.json ./
COPY --from=build --chown=root:root /app/node_modules ./node_modules
COPY --from=build --chown=root:root /app/dist ./dist
# The node user by its uid: the kubelet can check runAsNonRoot only against a numeric user.
USER 1000:1000
# data plane, management (/health, /ready), metrics (/metrics)
EXPOSE 1025 1026 1027
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.INFERMETER_MANAGEMENT_PORT || 1026) + '/health').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# A young generation of 8 MiB semi-spaces keeps the resident set flat under load; an old
# generation allowed 64 MiB before V8 starts marking keeps short-lived objects from being
# promoted wholesale (docs/performance.md). The same flags as the bin's shebang and npm start.
ENTRYPOINT ["node", "--max-semi-space-size=8", "--initial-heap-size=64", "dist/cli.js"]
