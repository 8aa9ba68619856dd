# syntax=docker/dockerfile:1
# infinity as one self-contained binary on distroless.
#
#   docker build -t infinity .                                         # CPU
#   docker build -t infinity:cuda --target cuda \
#     --build-arg ONNXRUNTIME_NODE_INSTALL=cuda12 .                   # NVIDIA GPU (CUDA 12 + cuDNN 9)
#   docker run -p 7997:7997 -v infinity-data:/data -e INFINITY_MODEL_ID=BAAI/bge-small-en-v1.5 infinity
#
# Every server option is an INFINITY_* variable (`docker run --rm infinity --help`).

ARG NODE_IMAGE=node:22-bookworm-slim
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04

# ---- build: npm ci (Bun comes from node_modules) and `bun run build` --------------------------------------------
FROM ${NODE_IMAGE} AS build
# "skip" keeps the CPU-only onnxruntime that ships inside the npm package (package.json's allowScripts denies
# onnxruntime-node's install script on npm 11+; npm 10 reads the variable); "cuda12" runs that install script
# explicitly to add the CUDA execution provider libraries, which the build then embeds in the binary next to
# libonnxruntime.so.1.
ARG ONNXRUNTIME_NODE_INSTALL=skip
WORKDIR /src
COPY package.json package-lock.json ./
RUN ONNXRUNTIME_NODE_INSTALL=${ONNXRUNTIME_NODE_INSTALL} npm ci --no-audit --no-fund \
 && if [ "${ONNXRUNTIME_NODE_INSTALL}" != skip ]; then \
      ONNXRUNTIME_NODE_INSTALL=${ONNXRUNTIME_NODE_INSTALL} node node_modules/onnxruntime-node/script/install.js; fi
COPY tsconfig.json ./
COPY build ./build
COPY src ./src
RUN npm run build
# Extract the native libraries now (any invocation does it) so that the final image starts without writing
# anything and works with a read-only root file system. This also proves the binary runs without node_modules.
RUN mkdir -p /out/data /out/native \
 && cd / && INFINITY_NATIVE_DIR=/out/native /src/dist/infinity --version \
 && cp /src/dist/infinity /out/infinity

# ---- runtime (default target): distroless with glibc + libstdc++ only ---------------------------------------------
FROM gcr.io/distroless/cc-debian12:nonroot AS cpu
COPY --from=build /out/infinity /usr/local/bin/infinity
COPY --from=build --chown=65532:65532 /out/native /opt/infinity/native
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV INFINITY_HOST=0.0.0.0 \
    INFINITY_HOME=/data \
    INFINITY_NATIVE_DIR=/opt/infinity/native \
    TMPDIR=/data/tmp \
    INFINITY_LOG_FORMAT=json
VOLUME ["/data"]
EXPOSE 7997
ENTRYPOINT ["/usr/local/bin/infinity"]

# ---- CUDA variant: build with --target cuda --build-arg ONNXRUNTIME_NODE_INSTALL=cuda12 -------------------------
# CUDA and cuDNN come from the NVIDIA base image; run with `--gpus all` (or the NVIDIA device plugin on Kubernetes).
FROM ${CUDA_IMAGE} AS cuda
COPY --from=build /out/infinity /usr/local/bin/infinity
COPY --from=build --chown=65532:65532 /out/native /opt/infinity/native
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
# The compiled binary cannot see the provider files inside node_modules, so --device auto would pick the CPU;
# ask for CUDA explicitly (it falls back to the CPU with a warning when no GPU is visible).
ENV INFINITY_HOST=0.0.0.0 \
    INFINITY_HOME=/data \
    INFINITY_NATIVE_DIR=/opt/infinity/native \
    TMPDIR=/data/tmp \
    INFINITY_LOG_FORMAT=json \
    INFINITY_DEVICE=cuda
VOLUME ["/data"]
EXPOSE 7997
ENTRYPOINT ["/usr/local/bin/infinity"]

# The last stage is what a plain `docker build .` produces: keep the CPU image the default.
FROM cpu
