// herd's data library (herd::data, libherd_data.so): MXNet's RecordIO files,
// read and written byte for byte, sharded per worker, prefetched on threads;
// and the IDX files of MNIST. It links no other herd library and needs no
// herd::init. docs/data.md describes it.
#pragma once

#include "herd/data/idx_file.h"
#include "herd/data/image_record.h"
#include "herd/data/record_index.h"
#include "herd/data/record_prefetcher.h"
#include "herd/data/record_shard.h"
#include "herd/data/recordio.h"
