/* SPDX-License-Identifier: MIT */
/*
 * Sockets: unix (sk-unix.c) and inet (sk-inet.c) kinds of fd_types[].
 * Sockets live in amber's network namespace: the dumped tree must share it.
 */
#ifndef AMBER_SK_H
#define AMBER_SK_H

#include <stdbool.h>
#include <stdint.h>

#include "files.h"

extern const struct fd_type unix_sk_type;
extern const struct fd_type inet_sk_type;

/* Is socket inode ino open in some process of the tree being dumped? */
bool sk_open_in_tree(struct tree *t, uint64_t ino);

/*
 * Copy what is queued for reading on fd without consuming it: MSG_PEEK
 * walked with SO_PEEK_OFF, which is put back as it was.  A datagram socket
 * gives one entry per datagram; a stream one chunks of its byte stream.
 */
int sk_peek_queue(int fd, bool stream, const char *what, SkQueued ***q, size_t *n);

/* The fd flags (O_NONBLOCK) of the dumped description, on a new socket. */
int sk_set_flags(int fd, const RegFile *f);

#endif
