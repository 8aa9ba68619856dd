// Generates src/server/grpc/protos.json (protobufjs' JSON descriptor, which @grpc/proto-loader loads with fromJSON)
// from the .proto files beside it, so the server and the single executable carry no .proto parser work or files.
// `bun build/grpc-proto.ts` rewrites it; test/server/grpc.test.ts checks it is current.
import protobuf from "protobufjs";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

export const GRPC_DIR = join(import.meta.dir, "..", "src", "server", "grpc");

export function renderDescriptor(): string {
  const root = new protobuf.Root();
  root.loadSync([join(GRPC_DIR, "tei.proto"), join(GRPC_DIR, "health.proto")], { keepCase: true });
  return JSON.stringify(root.toJSON({ keepComments: false }), null, 1) + "\n";
}

if (import.meta.main) {
  writeFileSync(join(GRPC_DIR, "protos.json"), renderDescriptor());
  process.stdout.write("src/server/grpc/protos.json written\n");
}
