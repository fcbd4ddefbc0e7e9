/* SPDX-License-Identifier: Apache-2.0 */
/* The list of sources stoker_dataset_open chooses from: the first whose claims() says 1
 * opens the path. A source this build lacks stays in the list as a refusal, so that its
 * paths get a message saying so rather than another source's misreading. */
#include "source/source.h"
#include "format/signature.h"

#include <string.h>
#include <strings.h>

extern const stoker__source stoker__shards_source;
#ifdef STOKER_HAVE_HDF5
extern const stoker__source stoker__hdf5_source;
#endif
#ifdef STOKER_HAVE_CURL
extern const stoker__source stoker__remote_source;
#else
static int url_claims(const char *path)
{
    return strncasecmp(path, "http://", 7) == 0 || strncasecmp(path, "https://", 8) == 0 ||
           strncasecmp(path, "s3://", 5) == 0; /* as the client takes them */
}

static const stoker__source stoker__remote_source = {
    .name = "remote",
    .claims = url_claims,
    .refusal = "a URL; this build cannot read remote data sets (it was built without libcurl)",
};
#endif

#ifndef STOKER_HAVE_HDF5
static int h5_url_claims(const char *path)
{
    return stoker__hdf5_url(path) > 0;
}

/* Local HDF5 files reach the shard source, which refuses them by their signature. */
static const stoker__source stoker__hdf5_source = {
    .name = "hdf5",
    .claims = h5_url_claims,
    .refusal = "a URL naming an HDF5 file; this build cannot read HDF5 data sets",
};
#endif

static const stoker__source *const SOURCES[] = {
#ifndef STOKER_HAVE_CURL
    &stoker__remote_source, /* every URL, refused */
#endif
    &stoker__hdf5_source, /* a file with HDF5's signature, FILE:/dataset, or a URL named so
                             (stoker__hdf5_url) */
#ifdef STOKER_HAVE_CURL
    &stoker__remote_source, /* other http://, https://, s3:// URLs: a packed data set */
#endif
    &stoker__shards_source, /* anything else: a packed data set, or an error saying why not */
};

const stoker__source *stoker__source_for(const char *path, int *rc)
{
    *rc = 0;
    for (size_t i = 0; i < sizeof SOURCES / sizeof SOURCES[0]; i++) {
        const int c = SOURCES[i]->claims(path);
        if (c != 0) {
            *rc = c < 0 ? c : 0;
            return SOURCES[i];
        }
    }
    return &stoker__shards_source; /* not reached: the shard source claims every path */
}
