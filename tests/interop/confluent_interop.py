"""Confluent's own serializers against wasmstream (issue 56).

Run by tests/integration/schema_interop_test.go with the interpreter of
tests/interop/setup.sh:

  confluent_interop.py produce BROKERS REGISTRY PREFIX N
      registers the output subjects' schemas (<PREFIX>-<fmt>-out-value:
      Avro and JSON Schema as text, Protobuf as Confluent's serializer
      registers a schema, its FileDescriptorProto in base64), produces N
      records to each of <PREFIX>-avro, <PREFIX>-proto and <PREFIX>-json
      with Confluent's AvroSerializer, ProtobufSerializer and
      JSONSerializer (which register the input schemas themselves), and
      prints the schema ids as one JSON object.

  confluent_interop.py consume BROKERS REGISTRY PREFIX N IDS_JSON
      reads N records from each <PREFIX>-<fmt>-out with Confluent's
      deserializers, checks each is framed with the output subject's id
      and equals what wasmstream's uppercase processor makes of its input,
      and prints a summary; exits 1 naming the first difference.

Everything is ASCII: the uppercase processor changes bytes, and a JSON
escape such as \\u00e9 would not survive it.
"""

import base64
import json
import struct
import sys
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, topic_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

FORMATS = ("avro", "proto", "json")

AVRO_IN = json.dumps({
    "type": "record", "name": "Reading", "namespace": "interop",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "id", "type": "long"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "email", "type": ["null", "string"], "default": None},
    ]})
AVRO_OUT = json.dumps({
    "type": "record", "name": "Upper", "namespace": "interop",
    "fields": [
        {"name": "NAME", "type": "string"},
        {"name": "ID", "type": "long"},
        {"name": "TAGS", "type": {"type": "array", "items": "string"}},
        {"name": "EMAIL", "type": ["null", "string"], "default": None},
    ]})


def json_schema(upper):
    f = (lambda s: s.upper()) if upper else (lambda s: s)
    return json.dumps({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Upper" if upper else "Reading",
        "type": "object",
        "properties": {
            f("name"): {"type": "string"},
            f("id"): {"type": "integer"},
            f("tags"): {"type": "array", "items": {"type": "string"}},
            f("email"): {"type": "string"},
        },
        "required": [f("name"), f("id"), f("tags")],
        "additionalProperties": False,
    })


def proto_class(upper):
    """A Protobuf message class built from a descriptor, as protoc's
    generated code would give it: interop.Reading or interop.Upper."""
    f = (lambda s: s.upper()) if upper else (lambda s: s)
    name = "Upper" if upper else "Reading"
    T = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="interop/%s.proto" % name.lower(), package="interop", syntax="proto3")
    m = fdp.message_type.add(name=name)
    m.field.add(name=f("id"), number=1, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL)
    m.field.add(name=f("name"), number=2, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    m.field.add(name=f("tags"), number=3, type=T.TYPE_STRING, label=T.LABEL_REPEATED)
    m.field.add(name=f("email"), number=4, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    fd = pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("interop." + name)), fdp


def reading(i):
    """The i-th input record, as a dict."""
    return {"name": "reader-%d" % i, "id": 1000 + i, "tags": ["t%d" % i, "kafka"], "email": "r%d@example.com" % i}


def expected(i):
    """What the uppercase processor makes of reading(i), as a dict."""
    r = reading(i)
    return {"NAME": r["name"].upper(), "ID": r["id"], "TAGS": [t.upper() for t in r["tags"]], "EMAIL": r["email"].upper()}


def fail(msg):
    print("confluent_interop.py: " + msg, file=sys.stderr)
    sys.exit(1)


SERDE_CONF = {"subject.name.strategy": topic_subject_name_strategy}


def produce(brokers, registry, prefix, n):
    sr = SchemaRegistryClient({"url": registry})
    ids = {}
    # The output subjects, which wasmstream encodes with.
    _, upper_fdp = proto_class(True)
    ids["avro-out"] = sr.register_schema(prefix + "-avro-out-value", Schema(AVRO_OUT, "AVRO"))
    ids["json-out"] = sr.register_schema(prefix + "-json-out-value", Schema(json_schema(True), "JSON"))
    ids["proto-out"] = sr.register_schema(prefix + "-proto-out-value",
                                          Schema(base64.standard_b64encode(upper_fdp.SerializeToString()).decode("ascii"), "PROTOBUF"))
    Reading, _ = proto_class(False)
    ser = {
        "avro": AvroSerializer(sr, AVRO_IN, conf=dict(SERDE_CONF)),
        "json": JSONSerializer(json_schema(False), sr, conf=dict(SERDE_CONF)),
        "proto": ProtobufSerializer(Reading, sr, dict(SERDE_CONF, **{"use.deprecated.format": False})),
    }
    p = Producer({"bootstrap.servers": brokers, "enable.idempotence": True, "acks": "all"})
    errs = []

    def report(err, _msg):
        if err is not None:
            errs.append(str(err))

    for fmt in FORMATS:
        topic = prefix + "-" + fmt
        for i in range(n):
            r = reading(i)
            v = Reading(**r) if fmt == "proto" else r
            b = ser[fmt](v, SerializationContext(topic, MessageField.VALUE))
            if b[0] != 0:
                fail("%s: the serializer wrote magic byte %d" % (fmt, b[0]))
            ids.setdefault(fmt + "-in", struct.unpack(">I", b[1:5])[0])
            p.produce(topic, key=str(i).encode(), value=b, on_delivery=report)
            p.poll(0)
    left = p.flush(60)
    if left or errs:
        fail("produce: %d not delivered, errors %s" % (left, errs[:3]))
    print(json.dumps(ids))


def consume(brokers, registry, prefix, n, ids):
    sr = SchemaRegistryClient({"url": registry})
    Upper, _ = proto_class(True)
    de = {
        "avro": AvroDeserializer(sr, conf=dict(SERDE_CONF)),
        "json": JSONDeserializer(None, schema_registry_client=sr, conf=dict(SERDE_CONF)),
        # Without the registry: Confluent's Protobuf deserializer asks for
        # the writer schema with ?format=serialized, which Apicurio does
        # not serve as Confluent's registry does; the frame (magic byte,
        # id, message indexes) is still read by the deserializer, and its
        # id checked below.
        "proto": ProtobufDeserializer(Upper, {"use.deprecated.format": False}),
    }
    c = Consumer({"bootstrap.servers": brokers, "group.id": prefix + "-interop-check",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    topics = {prefix + "-" + f + "-out": f for f in FORMATS}
    c.subscribe(list(topics))
    got = {f: {} for f in FORMATS}
    deadline = time.time() + 90
    try:
        while any(len(got[f]) < n for f in FORMATS):
            if time.time() > deadline:
                fail("consume: after 90s, outputs read: %s of %d each" % ({f: len(got[f]) for f in FORMATS}, n))
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                fail("consume: %s" % m.error())
            fmt = topics[m.topic()]
            b = m.value()
            if b is None or len(b) < 5 or b[0] != 0:
                fail("%s output %r: not framed: %r" % (fmt, m.key(), b[:8] if b else b))
            sid = struct.unpack(">I", b[1:5])[0]
            if sid != ids[fmt + "-out"]:
                fail("%s output %r framed with schema id %d, want the output subject's %d" % (fmt, m.key(), sid, ids[fmt + "-out"]))
            v = de[fmt](b, SerializationContext(m.topic(), MessageField.VALUE))
            if fmt == "proto":
                v = {"NAME": v.NAME, "ID": v.ID, "TAGS": list(v.TAGS), "EMAIL": v.EMAIL}
            i = int(m.key().decode())
            if v != expected(i):
                fail("%s output %d: %r, want %r" % (fmt, i, v, expected(i)))
            got[fmt][i] = True
    finally:
        c.close()
    print(json.dumps({f: len(got[f]) for f in FORMATS}))


def main(argv):
    if len(argv) >= 5 and argv[1] == "produce":
        produce(argv[2], argv[3], argv[4], int(argv[5]))
    elif len(argv) >= 7 and argv[1] == "consume":
        consume(argv[2], argv[3], argv[4], int(argv[5]), json.loads(argv[6]))
    else:
        fail("usage: confluent_interop.py produce BROKERS REGISTRY PREFIX N | consume BROKERS REGISTRY PREFIX N IDS_JSON")


if __name__ == "__main__":
    main(sys.argv)
