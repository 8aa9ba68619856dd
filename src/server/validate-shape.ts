// Bodies checked against a TypeBox schema inside a handler (routes whose path serves several shapes): the first
// failing field as a 400 in the one error shape, worded as Elysia's own validation errors are.
import type { Static, TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { InvalidInput } from "../errors";

export function checkShape<S extends TSchema>(schema: S, body: unknown, shape: string): Static<S> {
  const first = Value.Errors(schema, body).First();
  if (!first) return body as Static<S>;
  const param = first.path.replace(/^\//, "").replace(/\//g, ".") || null;
  const custom = (first.schema as { error?: unknown }).error;
  const what = typeof custom === "string" ? custom : `${param ? `\`${param}\`` : "body"}: ${first.message.toLowerCase()}`;
  throw new InvalidInput(`${what} (${shape})`, param);
}
