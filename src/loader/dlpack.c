/* SPDX-License-Identifier: Apache-2.0 */
/* stoker_dlpack_deleter and stoker_dlpack_capsule_destructor (stoker.h): thunks that run a
 * binding's release inside its interpreter with the interpreter's pending exception set
 * aside, from whichever thread the consumer frees a tensor on. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/common.h"

/* Set once by the binding before its first export and read by consumers' threads later. */
static _Atomic(const stoker_dlpack_guard *) dlpack_guard;

int stoker_dlpack_set_guard(const stoker_dlpack_guard *g)
{
    if (!g || !g->enter || !g->leave || !g->save || !g->restore || !g->deleter || !g->destructor ||
        !g->interrupt)
        return STOKER_E_INVALID;
    atomic_store_explicit(&dlpack_guard, g, memory_order_release);
    return 0;
}

/* fn(arg) holding the interpreter's lock, with no exception pending; the one pending before
 * (if any) is pending again afterwards, unchanged. An exception fn raised cannot propagate
 * through the consumer's C code; an interrupt it reports is raised again once the pending
 * exception is back, for the interpreter to act on when its code runs next. */
static void guarded_call(const stoker_dlpack_guard *g, int (*fn)(void *), void *arg)
{
    const int state = g->enter();
    void *type = NULL, *value = NULL, *traceback = NULL;
    g->save(&type, &value, &traceback);
    const int interrupted = fn(arg);
    g->restore(type, value, traceback);
    if (interrupted)
        g->interrupt();
    g->leave(state);
}

void stoker_dlpack_deleter(void *managed_tensor)
{
    const stoker_dlpack_guard *g = atomic_load_explicit(&dlpack_guard, memory_order_acquire);
    if (g && managed_tensor)
        guarded_call(g, g->deleter, managed_tensor);
}

void stoker_dlpack_capsule_destructor(void *capsule)
{
    const stoker_dlpack_guard *g = atomic_load_explicit(&dlpack_guard, memory_order_acquire);
    if (g && capsule)
        guarded_call(g, g->destructor, capsule);
}

/* ---- managed tensors made here (stoker_dlpack_export) ---- */

/* DLPack's classic ABI (dlpack.h v0.x), which consumers read by layout. */
enum { DL_CPU = 1, DL_CUDA = 2 };
enum { DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2, DL_BFLOAT = 4, DL_BOOL = 6 };

typedef struct {
    int32_t device_type, device_id;
} dl_device;

typedef struct {
    uint8_t code, bits;
    uint16_t lanes;
} dl_dtype;

typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} dl_tensor;

typedef struct dl_managed {
    dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct dl_managed *self);
} dl_managed;

/* One allocation: the managed tensor, then its shape and strides. */
typedef struct {
    dl_managed m;
    int64_t dims[2 * (STOKER_MAX_DIMS + 1)];
} exported;

static void exported_deleter(dl_managed *m)
{
    stoker_dlpack_deleter(m);
    free(m);
}

static bool dl_dtype_of(int32_t dtype, dl_dtype *out)
{
    static const uint8_t code[] = {
        [STOKER_DTYPE_UINT8] = DL_UINT,    [STOKER_DTYPE_INT8] = DL_INT,
        [STOKER_DTYPE_UINT16] = DL_UINT,   [STOKER_DTYPE_INT16] = DL_INT,
        [STOKER_DTYPE_UINT32] = DL_UINT,   [STOKER_DTYPE_INT32] = DL_INT,
        [STOKER_DTYPE_UINT64] = DL_UINT,   [STOKER_DTYPE_INT64] = DL_INT,
        [STOKER_DTYPE_FLOAT16] = DL_FLOAT, [STOKER_DTYPE_BFLOAT16] = DL_BFLOAT,
        [STOKER_DTYPE_FLOAT32] = DL_FLOAT, [STOKER_DTYPE_FLOAT64] = DL_FLOAT,
        [STOKER_DTYPE_BOOL] = DL_BOOL,
    };
    if (dtype < STOKER_DTYPE_UINT8 || dtype > STOKER_DTYPE_BOOL)
        return false;
    *out = (dl_dtype){code[dtype], (uint8_t)(8 * stoker_dtype_size(dtype)), 1};
    return true;
}

int stoker_dlpack_export(void *data, int32_t ndim, const int64_t *shape, int32_t dtype,
                         int32_t device, void **managed)
{
    dl_dtype dt;
    if (!managed || ndim < 0 || ndim > STOKER_MAX_DIMS + 1 || (ndim > 0 && !shape) ||
        !dl_dtype_of(dtype, &dt) || !atomic_load_explicit(&dlpack_guard, memory_order_acquire))
        return STOKER_E_INVALID;
    for (int32_t i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return STOKER_E_INVALID;
    exported *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    int64_t *dims = e->dims, *strides = e->dims + STOKER_MAX_DIMS + 1;
    int64_t step = 1;
    for (int32_t i = ndim - 1; i >= 0; i--) {
        dims[i] = shape[i];
        strides[i] = step;
        step *= shape[i] > 1 ? shape[i] : 1;
    }
    e->m.dl_tensor = (dl_tensor){
        .data = data,
        .device = device >= 0 ? (dl_device){DL_CUDA, device} : (dl_device){DL_CPU, 0},
        .ndim = ndim,
        .dtype = dt,
        .shape = dims,
        .strides = strides,
    };
    e->m.deleter = exported_deleter;
    *managed = &e->m;
    return 0;
}

void stoker_dlpack_delete(void *managed_tensor)
{
    dl_managed *m = managed_tensor;
    if (m && m->deleter)
        m->deleter(m);
}
