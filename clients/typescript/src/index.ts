// idemwatch: call the idem protocol (docs/contract/schema.md, version 3) correctly from TypeScript.
export * from "./errors";
export * from "./gatewayRefs";
export * from "./guard";
export * from "./keys";
export * from "./protocol";
export * from "./vocabulary";
