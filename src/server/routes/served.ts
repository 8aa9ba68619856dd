// Which model a request names: the served name of the /models/{served-name}/... prefix it came under (fixed when the
// routes are mounted), else the body's `model` field (absent or null: whichever model serves the capability).

export function servedName(fixed: string | undefined, model: string | null | undefined): string | undefined {
  return fixed ?? model ?? undefined;
}
