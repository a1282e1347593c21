/* SPDX-License-Identifier: MIT */
/*
 * A structure-aware mutation for the targets that decode protobuf-c
 * messages: one record of the input is decoded, one integer field in it
 * (nested and repeated ones too) gets a value near a boundary, another
 * field's value or a random one, and the record is encoded again in place.
 * libFuzzer's byte mutations seldom turn a multi-byte varint into another
 * valid one, and the checks of restore compare exactly those (addresses,
 * offsets, ids, counts) with bounds and with each other.  libprotobuf-c is
 * not instrumented, so coverage cannot guide the byte mutations there.
 */
#ifndef AMBER_FUZZ_MUTATE_H
#define AMBER_FUZZ_MUTATE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <protobuf-c/protobuf-c.h>

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

#define MAX_SLOTS 4096

/* An integer field of a decoded message: where it is, its width, its has_ flag. */
struct slot {
	void *p;
	int width; /* 4 or 8 bytes */
	protobuf_c_boolean *has;
};

static uint64_t rnd_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int type_width(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_ENUM:
	case PROTOBUF_C_TYPE_BOOL:
		return 4;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return 8;
	default:
		return 0; /* floats, strings, bytes, messages */
	}
}

/* The integer fields of m and of the messages in it, up to MAX_SLOTS. */
static void collect(ProtobufCMessage *m, struct slot *s, size_t *n, int depth)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < d->n_fields && *n < MAX_SLOTS; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		char *member = (char *)m + f->offset;
		int w = type_width(f->type);
		size_t cnt = 1;

		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			cnt = *(size_t *)((char *)m + f->quantifier_offset);
			member = *(char **)member;
		}
		for (size_t k = 0; k < cnt && *n < MAX_SLOTS; k++) {
			if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
				ProtobufCMessage *sub = ((ProtobufCMessage **)member)[k];

				if (sub && depth < 8)
					collect(sub, s, n, depth + 1);
				continue;
			}
			if (!w)
				continue;
			s[*n] = (struct slot){member + k * w, w, NULL};
			if (f->label == PROTOBUF_C_LABEL_OPTIONAL)
				s[*n].has =
					(protobuf_c_boolean *)((char *)m + f->quantifier_offset);
			(*n)++;
		}
	}
}

static uint64_t slot_get(const struct slot *s)
{
	uint32_t v32;
	uint64_t v64;

	if (s->width == 4) {
		memcpy(&v32, s->p, 4);
		return v32;
	}
	memcpy(&v64, s->p, 8);
	return v64;
}

static void slot_set(struct slot *s, uint64_t v)
{
	uint32_t v32 = (uint32_t)v;

	if (s->width == 4)
		memcpy(s->p, &v32, 4);
	else
		memcpy(s->p, &v, 8);
	if (s->has)
		*s->has = 1;
}

/* One integer field of m changed; false if m has none. */
static bool mutate_message(ProtobufCMessage *m, uint64_t *rs)
{
	static const uint64_t edges[] = {
		0,
		1,
		2,
		3,
		7,
		8,
		63,
		64,
		65,
		127,
		128,
		255,
		256,
		4095,
		4096,
		4097,
		32767,
		32768,
		65535,
		65536,
		65537,
		1 << 20,
		0x7fffffff,
		0x80000000,
		0xffffffff,
		1ULL << 32,
		1ULL << 47,
		1ULL << 56,
		(1ULL << 56) + 4096,
		1ULL << 63,
		~0ULL - 4095,
		~0ULL - 4096 * 2,
		~0ULL,
	};
	static struct slot s[MAX_SLOTS];
	size_t n = 0, i;
	uint64_t v, r;

	collect(m, s, &n, 0);
	if (!n)
		return false;
	i = rnd_next(rs) % n;
	r = rnd_next(rs);
	switch (r % 6) {
	case 0:
	case 1: /* a boundary, or next to one */
		v = edges[(r >> 8) % (sizeof(edges) / sizeof(edges[0]))];
		if (r & (1 << 4))
			v += (r >> 5 & 1) ? 1 : -1;
		break;
	case 2: /* another field's value, or a page from it: pids, ids, addresses that must match */
		v = slot_get(&s[rnd_next(rs) % n]);
		if (r & (1 << 4))
			v += ((r >> 5 & 1) ? 1 : -1) * (uint64_t)((r >> 6 & 1) ? 4096 : 1);
		break;
	case 3: /* a little more or less */
		v = slot_get(&s[i]) + (r >> 8) % 33 - 16;
		break;
	case 4: /* pages more or less */
		v = slot_get(&s[i]) + ((r >> 8) % 9 - 4) * 4096;
		break;
	default:
		v = rnd_next(rs) >> (r >> 8) % 64;
		break;
	}
	slot_set(&s[i], v);
	return true;
}

/*
 * Record payload [pay, pay + len) of data (size bytes, max_size room), whose
 * u32 length is at len_at, decoded with desc, mutated and encoded again in
 * place.  Returns the new size, or 0 if it could not be done.
 */
static size_t mutate_record(uint8_t *data, size_t size, size_t max_size, size_t len_at, size_t pay,
			    uint32_t len, const ProtobufCMessageDescriptor *desc, uint64_t *rs)
{
	ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, data + pay);
	size_t nlen, nsize = 0;
	uint32_t nlen32;
	uint8_t *buf;

	if (!m)
		return 0;
	if (!mutate_message(m, rs))
		goto free_msg;
	nlen = protobuf_c_message_get_packed_size(m);
	if (size - len + nlen > max_size || nlen > UINT32_MAX)
		goto free_msg;
	buf = malloc(nlen ? nlen : 1);
	if (!buf)
		goto free_msg;
	protobuf_c_message_pack(m, buf);
	memmove(data + pay + nlen, data + pay + len, size - pay - len);
	memcpy(data + pay, buf, nlen);
	nlen32 = (uint32_t)nlen;
	memcpy(data + len_at, &nlen32, 4);
	nsize = size - len + nlen;
	free(buf);
free_msg:
	protobuf_c_message_free_unpacked(m, NULL);
	return nsize;
}

#endif
