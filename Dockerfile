# infermeter container image: build with the dev toolchain, run with production dependencies
# only, as the unprivileged `node` user. Built and run by `npm run image:test` (scripts/image-test.ts)
# with docker or podman/buildah; docs/deploy.md records a run.
#
# The base is pinned to a Node 24 release. To pin the exact bytes as well, append its digest,
# which `docker buildx imagetools inspect node:24.21.0-bookworm-slim` or
# `skopeo inspect docker://docker.io/library/node:24.21.0-bookworm-slim` prints:
#   --build-arg NODE_IMAGE=node:24.21.0-bookworm-slim@sha256:<digest>
# (or write it here). The image test passes a stand-in base where no registry is reachable.
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the image already has Node 24, the node@24 dev dependency is not needed.
# Behind a TLS-intercepting proxy, give its CA as a build secret (never stored in a layer):
# `--secret id=npm-ca,src=/path/to/ca.crt`.
RUN --mount=type=secret,id=npm-ca \
  if [ -f /run/secrets/npm-ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm-ca; fi; \
  npm ci --ignore-scripts --no-audit --no-fund
# After the install, so that editing a tsconfig does not re-run it.
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# The demo (a simulator, a proxy and traffic in one process) and the source maps (nothing runs
# with --enable-source-maps) are left out; the simulator (dist/sim) stays, a few kilobytes that
# let the image be tried without a model server.
# npm prune leaves the scope folders (and .bin) of the dev dependencies it removed behind, empty:
# they go too (test/unit/dockerfile-build.test.ts runs these commands on a small project).
RUN npm run build && rm dist/demo.js && find dist -name '*.map' -delete \
  && npm prune --omit=dev --ignore-scripts --no-audit --no-fund \
  && find node_modules -depth -type d -empty \( -name '@*' -o -name .bin \) -delete

FROM ${NODE_IMAGE}
# In a container the address is the container's own and what reaches it is decided by `-p` or a
# network policy, so the image listens on every address by default. INFERMETER_DEFAULT_HOST is
# only that default: INFERMETER_HOST, MIES_CONTAINER_IP and a config file's ipAddress (and the
# management equivalents) still win, and 0.0.0.0 given through them still needs
# INFERMETER_ALLOW_ALL_ZERO_IP=1, as MindIE requires. Lock the metrics port down with
# INFERMETER_METRICS_TOKEN and a network policy.
ENV NODE_ENV=production \
    INFERMETER_DEFAULT_HOST=0.0.0.0
WORKDIR /app
COPY --from=build --chown=root:root /app/package.json ./
COPY --from=build --chown=root:root /app/node_modules ./node_modules
COPY --from=build --chown=root:root /app/dist ./dist
# The node user by its uid: the kubelet can check runAsNonRoot only against a numeric user.
USER 1000:1000
# data plane, management (/health, /ready), metrics (/metrics)
EXPOSE 1025 1026 1027
# The probe reads the configuration as infermeter does (variables, MIES_*, INFERMETER_CONFIG),
# so it asks where the management port really listens, over HTTPS when that port has TLS. It is
# one short Node process, about 0.09 s of CPU: with `--cpus 0.1` a run took about 1 s idle and
# 2.3 s at most with the tenth of a core saturated by 100 streams (docs/deploy.md), hence a
# 15 s timeout (the probe's own is 10 s) and a 30 s interval. Docker honours HEALTHCHECK; buildah
# and podman keep it only with `--format docker`; Kubernetes ignores it and has its own probes.
HEALTHCHECK --interval=30s --timeout=15s --start-period=15s --retries=3 \
  CMD ["node", "dist/healthcheck.js"]
# A young generation capped at 32 MiB semi-spaces keeps the resident set flat under load and a
# /metrics render at a third of its time with 8 MiB; an old
# generation allowed 64 MiB before V8 starts marking keeps short-lived objects from being
# promoted wholesale (docs/performance.md). The same flags as the bin's shebang and npm start.
ENTRYPOINT ["node", "--max-semi-space-size=32", "--initial-heap-size=64", "dist/cli.js"]
