/* SPDX-License-Identifier: Apache-2.0 */
/* The one table of loader statistics: every field of stoker_stats (include/stoker.h, whose
 * layout is the ABI) in the struct's order, with its type, the enum naming an int32's
 * values, the decimals the JSON gives a double and a one-line doc (the short form of the
 * comment beside the field in stoker.h). stoker_stats_field exports it; the JSON
 * (stoker_stats_json), the Python binding's struct and docstring and stoker-bench's report
 * are made from it, tests/test_stats_table.c checks each row's offset and size against
 * the struct and that the rows tile it, and tests/python/test_stats_table.py checks the
 * struct's field names against it. A new counter is a field in stoker.h, a row here and
 * the line that fills it (fill_stats, src/loader/stats.c).
 *
 * X(name, type, values, decimals, doc): type is I32, I64, F64 or TEXT (a char array);
 * values a stoker_enum for an I32 reported by name, else 0. */
#ifndef STOKER_STATS_TABLE_H
#define STOKER_STATS_TABLE_H

#define STOKER__STATS_FIELDS(X)                                                                    \
    X(backend, I32, STOKER_ENUM_BACKEND, 0, "the read back-end in use")                            \
    X(simd, I32, STOKER_ENUM_SIMD, 0, "the SIMD level in use")                                     \
    X(threads, I32, 0, 0, "worker threads")                                                        \
    X(depth, I32, 0, 0, "batch slots")                                                             \
    X(device, I32, 0, 0, "the batches' CUDA device, -1: host memory")                              \
    X(batches, I64, 0, 0, "batches delivered")                                                     \
    X(records, I64, 0, 0, "records delivered")                                                     \
    X(bytes, I64, 0, 0, "bytes delivered (batch data)")                                            \
    X(skipped, I64, 0, 0, "records replaced in delivered batches (on_corrupt skip)")               \
    X(records_read, I64, 0, 0, "records read by the workers (read-ahead included)")                \
    X(bytes_read, I64, 0, 0, "bytes read by the workers")                                          \
    X(pinned_bytes, I64, 0, 0, "page-locked host memory held")                                     \
    X(seconds, F64, 0, 6, "seconds since create")                                                  \
    X(records_per_sec, F64, 0, 3, "records delivered per second since create")                     \
    X(bytes_per_sec, F64, 0, 3, "bytes delivered per second since create")                         \
    X(wait_seconds, F64, 0, 6, "the consumer's time in next, its binding's included")              \
    X(ready_slots, F64, 0, 3, "mean ready batches found by next")                                  \
    X(reads_in_flight, F64, 0, 3, "mean reads in flight per worker")                               \
    X(read_seconds, F64, 0, 6, "worker seconds in the reader")                                     \
    X(crc_seconds, F64, 0, 6, "worker seconds of CRC32C checks")                                   \
    X(process_seconds, F64, 0, 6, "worker seconds of the process step")                            \
    X(decode_seconds, F64, 0, 6, "worker seconds of JPEG decoding")                                \
    X(resize_seconds, F64, 0, 6, "worker seconds of cropping and resampling")                      \
    X(normalize_seconds, F64, 0, 6, "worker seconds of normalising")                               \
    X(reduced, I64, 0, 0, "images decoded at 1/2, 1/4 or 1/8 (dct_scale)")                         \
    X(dropped_bytes, I64, 0, 0, "read bytes dropped from the page cache (max_cache)")              \
    X(decoder, I32, STOKER_ENUM_DECODER, 0, "the JPEG decoder in effect")                          \
    X(cpu_decoded, I64, 0, 0, "images the workers decoded")                                        \
    X(gpu_decoded, I64, 0, 0, "images the GPU decoded")                                            \
    X(gpu_retried, I64, 0, 0, "images the GPU refused or failed, then decoded by the CPU")         \
    X(gpu_fallbacks, I64, 0, 0, "times the CPU took everything after GPU failures")                \
    X(gpu_share, F64, 0, 4, "share of the eligible images the GPU takes now")                      \
    X(cpu_busy, F64, 0, 4, "fraction of the workers' time spent on records")                       \
    X(gpu_busy, F64, 0, 4, "fraction of the time the GPU decode stage was busy")                   \
    X(decoder_note, TEXT, 0, 0, "why the GPU decodes what it decodes")                             \
    X(full_checks, I64, 0, 0, "JPEGs decoded to the end of their data to find damage")             \
    X(remote_bytes, I64, 0, 0, "body bytes fetched over the network")                              \
    X(remote_requests, I64, 0, 0, "remote requests sent (retries included)")                       \
    X(remote_retries, I64, 0, 0, "remote requests sent again after a fault")                       \
    X(cache_hits, I64, 0, 0, "blocks found in the block cache")                                    \
    X(cache_misses, I64, 0, 0, "blocks this process fetched (or found another fetching)")          \
    X(cache_bytes, I64, 0, 0, "bytes of blocks in the block cache at the last count")              \
    X(cache_limit, I64, 0, 0, "the block cache's limit in effect (bytes)")                         \
    X(fetch_wait_seconds, F64, 0, 6, "worker seconds waiting for remote blocks")                   \
    X(threads_note, TEXT, 0, 0, "how the thread count was chosen")                                 \
    X(h2d_seconds, F64, 0, 6, "seconds the host-to-device copy stage was busy")                    \
    X(gpu_decode_seconds, F64, 0, 6, "seconds the GPU decode stage was busy")                      \
    X(next_calls, I64, 0, 0, "batches handed out by next")                                         \
    X(ready_sum, I64, 0, 0, "ready batches found by those calls, summed")                          \
    X(cache_records, I64, 0, 0, "records read from blocks in the block cache")

#endif
