import { describe, expect, it } from 'vitest';
import { KvEventRecorder } from '../../src/events/kv-event-recorder.js';
import { KvEventOverflowError, KvEventStream } from '../../src/events/kv-event-stream.js';

/** A recorder standing in for an engine: its GPU sink reports, flush ends a "step". */
function recorderSource() {
  const recorder = new KvEventRecorder();
  const gpu = recorder.sinkFor('GPU', 4);
  const cpu = recorder.sinkFor('CPU', 8);
  return { recorder, gpu, cpu, source: { addKvEventListener: recorder.addListener.bind(recorder) } };
}

describe('KV event batches', () => {
  it("hold a step's events in order, consecutive removals of one tier sharing an event, and an empty step publishes nothing", () => {
    const { recorder, gpu, cpu } = recorderSource();
    const batches: unknown[] = [];
    recorder.addListener((batch) => batches.push(batch));
    gpu.stored(['a', 'b'], null, [1, 2, 3, 4, 5, 6, 7, 8]);
    gpu.removed('x');
    gpu.removed('y');
    cpu.removed('z');
    gpu.removed('w');
    recorder.flush(12.5);
    recorder.flush(13);
    expect(batches).toEqual([
      {
        ts: 12.5,
        events: [
          { type: 'BlockStored', blockHashes: ['a', 'b'], parentBlockHash: null, tokenIds: [1, 2, 3, 4, 5, 6, 7, 8], blockSize: 4, medium: 'GPU' },
          { type: 'BlockRemoved', blockHashes: ['x', 'y'], medium: 'GPU' },
          { type: 'BlockRemoved', blockHashes: ['z'], medium: 'CPU' },
          { type: 'BlockRemoved', blockHashes: ['w'], medium: 'GPU' },
        ],
      },
    ]);
  });
});

describe('the KV event stream', () => {
  it('yields batches in order and ends when closed, after what it buffered', async () => {
    const { recorder, gpu, source } = recorderSource();
    const stream = new KvEventStream(source);
    gpu.removed('a');
    recorder.flush(1);
    gpu.removed('b');
    recorder.flush(2);
    stream.close();
    const seen: number[] = [];
    for await (const batch of stream) seen.push(batch.ts);
    expect(seen).toEqual([1, 2]);
    expect(recorder.listenerCount).toBe(0);
  });

  it('ends with KvEventOverflowError rather than drop a batch when its reader falls too far behind', async () => {
    const { recorder, gpu, source } = recorderSource();
    const stream = new KvEventStream(source, { maxBuffered: 2 });
    for (let step = 0; step < 3; step++) {
      gpu.removed(`h${step}`);
      recorder.flush(step);
    }
    await expect(stream.next()).rejects.toBeInstanceOf(KvEventOverflowError);
    await expect(stream.next()).rejects.toMatchObject({ code: 'ERR_KVTIER_KV_EVENTS_OVERFLOW' });
    expect(recorder.listenerCount).toBe(0);
  });

  it('hands a batch straight to a reader already waiting', async () => {
    const { recorder, gpu, source } = recorderSource();
    const stream = new KvEventStream(source);
    const next = stream.next();
    gpu.removed('a');
    recorder.flush(7);
    expect(await next).toMatchObject({ done: false, value: { ts: 7 } });
    await stream.return();
    expect(await stream.next()).toEqual({ value: undefined, done: true });
  });
});
