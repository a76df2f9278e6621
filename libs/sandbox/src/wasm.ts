/**
 * The few parts of the WebAssembly API the sandbox uses: Node's types (without the DOM lib) do
 * not declare them.
 */
export interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}

/** A compiled WebAssembly module (opaque here); it can be posted to a worker thread. */
export interface WasmModule {
  readonly [Symbol.toStringTag]: string;
}

interface WasmApi {
  Memory: new (descriptor: { initial: number; maximum?: number }) => WasmMemory;
  compile(bytes: Uint8Array): Promise<WasmModule>;
}

/** The global `WebAssembly`. */
export const wasmApi = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
