/* Small public getters over a data set's internals that tools need (stoker-bench's raw
 * read bandwidth reads every shard file directly). */
#include "format/dataset.h"

const char *stoker_dataset_shard_path(const stoker_dataset *ds, int32_t i)
{
    if (!ds || i < 0 || i >= stoker_dataset_num_shards(ds))
        return NULL;
    return stoker__dataset_shard_path(ds, i);
}
