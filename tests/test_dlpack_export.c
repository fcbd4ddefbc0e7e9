/* SPDX-License-Identifier: Apache-2.0 */
/* stoker_dlpack_export: refused before a guard is set; the managed tensor's layout (DLPack's
 * classic ABI, mirrored here as a consumer reads it) for host and device tensors of every
 * dtype; its deleter running the guard's deleter once, inside the guard's enter/save and
 * restore/leave, on the tensor's address, then freeing it (AddressSanitizer's leak check
 * sees a tensor left); an interrupt the deleter reports raised again after restore, before
 * leave; stoker_dlpack_delete; the arguments refused. */
#include "testutil.h"

typedef struct {
    void *data;
    int32_t device_type, device_id;
    int32_t ndim;
    uint8_t code, bits;
    uint16_t lanes;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} mirror_tensor;

typedef struct mirror_managed {
    mirror_tensor t;
    void *manager_ctx;
    void (*deleter)(struct mirror_managed *self);
} mirror_managed;

static int entered, left, saved, restored, deleted, destroyed, interrupted, interrupt_next;
static void *last_deleted;

static int enter(void)
{
    entered++;
    return 7;
}

static void leave(int state)
{
    T_EQ_INT(state, 7);
    left++;
}

static void save(void **type, void **value, void **traceback)
{
    (void)type, (void)value, (void)traceback;
    saved++;
}

static void restore(void *type, void *value, void *traceback)
{
    (void)type, (void)value, (void)traceback;
    restored++;
}

static int on_delete(void *managed)
{
    T_EQ_INT(entered, left + 1); /* inside enter .. leave */
    T_EQ_INT(saved, restored + 1);
    last_deleted = managed;
    deleted++;
    const int again = interrupt_next;
    interrupt_next = 0;
    return again;
}

static int on_destroy(void *capsule)
{
    (void)capsule;
    destroyed++;
    return 0;
}

/* raised again after the pending exception is back, before the lock is let go */
static void on_interrupt(void)
{
    T_EQ_INT(entered, left + 1);
    T_EQ_INT(saved, restored);
    interrupted++;
}

static mirror_managed *export(void *data, int32_t ndim, const int64_t *shape, int32_t dtype,
                              int32_t device)
{
    void *m = NULL;
    T_OK(stoker_dlpack_export(data, ndim, shape, dtype, device, &m));
    T_ASSERT(m != NULL);
    return m;
}

int main(void)
{
    static const stoker_dlpack_guard guard = {enter,     leave,      save,        restore,
                                              on_delete, on_destroy, on_interrupt};
    stoker_dlpack_guard partial = guard;
    partial.interrupt = NULL;
    T_EQ_RC(stoker_dlpack_set_guard(&partial), STOKER_E_INVALID);
    const int64_t shape[4] = {2, 3, 1, 5};
    uint8_t buf[64];
    void *m = NULL;
    T_EQ_RC(stoker_dlpack_export(buf, 4, shape, STOKER_DTYPE_UINT8, -1, &m), STOKER_E_INVALID);
    T_ASSERT(m == NULL);
    T_OK(stoker_dlpack_set_guard(&guard));

    /* a host uint8 [2, 3, 1, 5]: C-contiguous strides, the shape copied */
    int64_t mine[4] = {2, 3, 1, 5};
    mirror_managed *t = export(buf, 4, mine, STOKER_DTYPE_UINT8, -1);
    mine[0] = 99;
    T_ASSERT(t->t.data == buf);
    T_EQ_INT(t->t.device_type, 1);
    T_EQ_INT(t->t.device_id, 0);
    T_EQ_INT(t->t.ndim, 4);
    T_EQ_INT(t->t.code, 1);
    T_EQ_INT(t->t.bits, 8);
    T_EQ_INT(t->t.lanes, 1);
    T_EQ_INT(t->t.byte_offset, 0);
    T_ASSERT(t->manager_ctx == NULL);
    static const int64_t strides[4] = {15, 5, 5, 1};
    for (int i = 0; i < 4; i++) {
        T_EQ_INT(t->t.shape[i], shape[i]);
        T_EQ_INT(t->t.strides[i], strides[i]);
    }
    T_ASSERT(t->deleter != NULL);
    t->deleter(t);
    T_EQ_INT(deleted, 1);
    T_ASSERT(last_deleted == t);
    T_EQ_INT(entered, 1);
    T_EQ_INT(left, 1);
    T_EQ_INT(restored, 1);
    T_EQ_INT(interrupted, 0);

    /* an interrupt the binding's deleter reports is raised again, once */
    t = export(buf, 4, mine, STOKER_DTYPE_UINT8, -1);
    interrupt_next = 1;
    t->deleter(t);
    T_EQ_INT(interrupted, 1);
    T_EQ_INT(left, 2);

    /* every dtype's code and bits; a device tensor; a scalar; delete through the library */
    static const struct {
        int32_t dtype;
        uint8_t code, bits;
    } dt[] = {{STOKER_DTYPE_UINT8, 1, 8},    {STOKER_DTYPE_INT8, 0, 8},
              {STOKER_DTYPE_UINT16, 1, 16},  {STOKER_DTYPE_INT16, 0, 16},
              {STOKER_DTYPE_UINT32, 1, 32},  {STOKER_DTYPE_INT32, 0, 32},
              {STOKER_DTYPE_UINT64, 1, 64},  {STOKER_DTYPE_INT64, 0, 64},
              {STOKER_DTYPE_FLOAT16, 2, 16}, {STOKER_DTYPE_BFLOAT16, 4, 16},
              {STOKER_DTYPE_FLOAT32, 2, 32}, {STOKER_DTYPE_FLOAT64, 2, 64},
              {STOKER_DTYPE_BOOL, 6, 8}};
    for (size_t i = 0; i < sizeof dt / sizeof dt[0]; i++) {
        t = export(buf, 1, shape + 1, dt[i].dtype, 3);
        T_EQ_INT(t->t.device_type, 2);
        T_EQ_INT(t->t.device_id, 3);
        T_EQ_INT(t->t.code, dt[i].code);
        T_EQ_INT(t->t.bits, dt[i].bits);
        T_EQ_INT(t->t.strides[0], 1);
        stoker_dlpack_delete(t);
        T_ASSERT(last_deleted == t);
    }
    T_EQ_INT(deleted, 2 + (int)(sizeof dt / sizeof dt[0]));
    T_EQ_INT(interrupted, 1);
    t = export(buf, 0, NULL, STOKER_DTYPE_FLOAT32, -1);
    T_EQ_INT(t->t.ndim, 0);
    stoker_dlpack_delete(t);
    stoker_dlpack_delete(NULL);

    /* refused: nothing made */
    const int64_t negative[2] = {2, -1};
    int64_t big[STOKER_MAX_DIMS + 2];
    for (int i = 0; i < STOKER_MAX_DIMS + 2; i++)
        big[i] = 1;
    m = NULL;
    T_EQ_RC(stoker_dlpack_export(buf, 2, negative, STOKER_DTYPE_UINT8, -1, &m), STOKER_E_INVALID);
    T_EQ_RC(stoker_dlpack_export(buf, STOKER_MAX_DIMS + 2, big, STOKER_DTYPE_UINT8, -1, &m),
            STOKER_E_INVALID);
    T_EQ_RC(stoker_dlpack_export(buf, -1, shape, STOKER_DTYPE_UINT8, -1, &m), STOKER_E_INVALID);
    T_EQ_RC(stoker_dlpack_export(buf, 1, NULL, STOKER_DTYPE_UINT8, -1, &m), STOKER_E_INVALID);
    T_EQ_RC(stoker_dlpack_export(buf, 1, shape, STOKER_DTYPE_DEFAULT, -1, &m), STOKER_E_INVALID);
    T_EQ_RC(stoker_dlpack_export(buf, 1, shape, 99, -1, &m), STOKER_E_INVALID);
    T_EQ_RC(stoker_dlpack_export(buf, 1, shape, STOKER_DTYPE_UINT8, -1, NULL), STOKER_E_INVALID);
    T_ASSERT(m == NULL);
    big[0] = STOKER_MAX_DIMS + 1; /* the most dimensions there are */
    t = export(buf, STOKER_MAX_DIMS + 1, big, STOKER_DTYPE_UINT8, -1);
    T_EQ_INT(t->t.strides[0], 1);
    T_EQ_INT(t->t.shape[STOKER_MAX_DIMS], 1);
    t->deleter(t);
    T_EQ_INT(destroyed, 0);
    printf("test_dlpack_export: ok\n");
    return 0;
}
