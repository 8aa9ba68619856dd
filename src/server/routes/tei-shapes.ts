// Field conventions shared by the TEI-shaped adapters.
import type { Truncation } from "../jobs";

/** TEI's truncate (absent/null: cut) and truncation_direction (TEI's clients send "Right"/"Left" too). */
export function truncationOf(truncate: boolean | null | undefined, direction: string | null | undefined): Truncation {
  return { truncate: truncate !== false, direction: direction?.toLowerCase() === "left" ? "left" : "right" };
}
