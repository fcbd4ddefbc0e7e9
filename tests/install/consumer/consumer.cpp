/* SPDX-License-Identifier: Apache-2.0 */
// An installed-library consumer in C++: the header must compile as C++ and link.
#include <stoker.h>

#include <cstdio>
#include <memory>

int main()
{
    stoker_config *raw = nullptr;
    if (stoker_config_create(&raw) != 0)
        return 1;
    std::unique_ptr<stoker_config, decltype(&stoker_config_destroy)> cfg(raw,
                                                                         stoker_config_destroy);
    if (stoker_config_set_int(cfg.get(), STOKER_OPT_BATCH_SIZE, 64) != 0)
        return 1;
    int64_t v = 0;
    if (stoker_config_get_int(cfg.get(), STOKER_OPT_BATCH_SIZE, &v) != 0 || v != 64)
        return 1;
    std::printf("C++ consumer: stoker %s, %s\n", stoker_version_string(),
                stoker_strerror(STOKER_E_CORRUPT));
    return 0;
}
