// The model families the server serves, in the order they are asked: the first whose `serves` accepts a layout
// builds its model (media and ColPali models first: their task is also embed / multivector).
import { ModelLoadError } from "../../errors";
import type { ModelLayout } from "../../model/layout";
import { classifyFamily } from "./classify";
import { colbertFamily } from "./colbert";
import { colpaliFamily } from "./colpali";
import { embedFamily } from "./embed";
import type { Family } from "./family";
import { hybridFamily } from "./hybrid";
import { mediaTowersFamily } from "./media-towers";
import { rerankFamily } from "./rerank";
import { sparseFamily } from "./sparse";

export const FAMILIES: readonly Family<any, any>[] = [
  mediaTowersFamily, colpaliFamily, embedFamily, rerankFamily, classifyFamily, sparseFamily, colbertFamily, hybridFamily,
];

export function familyOf(layout: ModelLayout): Family<any, any> {
  const family = FAMILIES.find((f) => f.serves(layout));
  if (!family) throw new ModelLoadError(`no model family serves a ${layout.task} model (${layout.architecture})`);
  return family;
}
