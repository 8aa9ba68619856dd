// Files imported as text (`with { type: "text" }`): Bun inlines them, in the compiled binary too.
declare module "swagger-ui-dist/swagger-ui-bundle.js" {
  const text: string;
  export default text;
}
declare module "swagger-ui-dist/swagger-ui.css" {
  const text: string;
  export default text;
}
