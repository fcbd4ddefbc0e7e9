/* SPDX-License-Identifier: Apache-2.0 */
/* NVTX ranges with the toolkit's header-only NVTX 3 (nvtx.h): one domain, "stoker", and a
 * registered string per range, made once. */
#include "cuda/nvtx.h"

#include <nvtx3/nvToolsExt.h>
#include <pthread.h>

static const char *const NAMES[STOKER__NVTX_RANGES] = {"next", "piece", "h2d", "gpu decode",
                                                       "fetch"};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static nvtxDomainHandle_t domain;
static nvtxEventAttributes_t attrs[STOKER__NVTX_RANGES];

static void init(void)
{
    domain = nvtxDomainCreateA("stoker");
    for (int i = 0; i < STOKER__NVTX_RANGES; i++) {
        nvtxEventAttributes_t *a = &attrs[i];
        a->version = NVTX_VERSION;
        a->size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        a->messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        a->message.registered = nvtxDomainRegisterStringA(domain, NAMES[i]);
    }
}

static const nvtxEventAttributes_t *attr(stoker__nvtx_range r)
{
    pthread_once(&once, init);
    return &attrs[r];
}

void stoker__nvtx_push(stoker__nvtx_range r)
{
    nvtxDomainRangePushEx(domain, attr(r));
}

void stoker__nvtx_pop(void)
{
    nvtxDomainRangePop(domain);
}

uint64_t stoker__nvtx_start(stoker__nvtx_range r)
{
    return nvtxDomainRangeStartEx(domain, attr(r));
}

void stoker__nvtx_end(uint64_t id)
{
    if (id)
        nvtxDomainRangeEnd(domain, id);
}
