# Sourced by kafka.sh for `kafka.sh start --secure`: a broker with SASL_SSL
# and SSL (client certificates required) listeners beside PLAINTEXT, with
# KRaft's StandardAuthorizer on.
#
#   PLAINTEXT  $KAFKA_PORT           principal User:ANONYMOUS (a super user:
#                                    test setup, ACLs, the probe)
#   SASL_SSL   $KAFKA_SASL_SSL_PORT  PLAIN, SCRAM-SHA-256, SCRAM-SHA-512,
#                                    OAUTHBEARER (unsecured JWS: alg none)
#   SSL        $KAFKA_SSL_PORT       mTLS: the client certificate's CN is the
#                                    principal
#   PLAINONLY  $KAFKA_PLAIN_ONLY_PORT SASL_SSL with PLAIN only: a listener that
#                                    does not enable a client's mechanism
#
# Everything the clients need lands in $KAFKA_DATA_DIR/secure:
#   ca.pem                the CA that signed the broker's and client's certs
#   client.pem client.key the client certificate (CN=wasmstream-client)
#   <user>.password       each SASL user's password (mode 0600)
# Users: admin (SCRAM-SHA-512, super user), app (SCRAM-SHA-512, no ACLs:
# for least-privilege tests), scram256 (SCRAM-SHA-256), plainuser (PLAIN);
# OAUTHBEARER takes any token whose sub is a user (super user: oauthuser);
# the client certificate's principal wasmstream-client is a super user.
#
# start prints, beside KAFKA_BROKERS, KAFKA_SASL_SSL_BROKERS,
# KAFKA_SSL_BROKERS and KAFKA_SECURE_DIR.

KAFKA_SASL_SSL_PORT="${KAFKA_SASL_SSL_PORT:-$((KAFKA_PORT + 2))}"
KAFKA_SSL_PORT="${KAFKA_SSL_PORT:-$((KAFKA_PORT + 3))}"
KAFKA_PLAIN_ONLY_PORT="${KAFKA_PLAIN_ONLY_PORT:-$((KAFKA_PORT + 4))}"
SECURE_DIR="$KAFKA_DATA_DIR/secure"
SECURE_SUPER_USERS="User:ANONYMOUS;User:admin;User:scram256;User:plainuser;User:oauthuser;User:wasmstream-client"

# secure_password USER: a fresh random password for USER, kept in
# $SECURE_DIR/USER.password (0600).
secure_password() {
    local f="$SECURE_DIR/$1.password"
    if [[ ! -f "$f" ]]; then
        (umask 077; head -c 18 /dev/urandom | base64 | tr '+/' '-_' >"$f")
    fi
    cat "$f"
}

# secure_certs: a CA, the broker's certificate (127.0.0.1, localhost) and a
# client certificate, all PEM; the broker reads its key and chain as a PEM
# keystore.
secure_certs() {
    command -v openssl >/dev/null 2>&1 || die "openssl not found on PATH (start --secure makes certificates with it)"
    mkdir -p "$SECURE_DIR"
    local d="$SECURE_DIR"
    (
        umask 077
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
            -subj "/CN=wasmstream-test-ca" -keyout "$d/ca.key" -out "$d/ca.pem"
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -subj "/CN=localhost" -keyout "$d/server.key" -out "$d/server.csr"
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$d/server.ext"
        openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
            -days 30 -extfile "$d/server.ext" -out "$d/server.crt"
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -subj "/CN=wasmstream-client" -keyout "$d/client.key" -out "$d/client.csr"
        printf 'extendedKeyUsage=clientAuth\n' >"$d/client.ext"
        openssl x509 -req -in "$d/client.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
            -days 30 -extfile "$d/client.ext" -out "$d/client.pem"
        # Kafka's PEM keystore: the private key (PKCS#8), then the chain.
        openssl pkcs8 -topk8 -nocrypt -in "$d/server.key" -out "$d/server.p8"
        cat "$d/server.p8" "$d/server.crt" "$d/ca.pem" >"$d/server-keystore.pem"
    ) 2>>"$LOG_FILE" || die "openssl could not make the test certificates (see $LOG_FILE)"
    chmod 644 "$d/ca.pem" "$d/client.pem"
}

# secure_config appends the listeners, TLS, SASL and authorizer settings to
# the broker's properties (a later key overrides an earlier one).
secure_config() {
    local plainpw
    plainpw="$(secure_password plainuser)"
    cat >>"$PROPS_FILE" <<EOF

# start --secure (tests/kafka/secure.sh)
listeners=PLAINTEXT://$KAFKA_HOST:$KAFKA_PORT,CONTROLLER://$KAFKA_HOST:$KAFKA_CONTROLLER_PORT,SASL_SSL://$KAFKA_HOST:$KAFKA_SASL_SSL_PORT,SSL://$KAFKA_HOST:$KAFKA_SSL_PORT,PLAINONLY://$KAFKA_HOST:$KAFKA_PLAIN_ONLY_PORT
advertised.listeners=PLAINTEXT://$KAFKA_HOST:$KAFKA_PORT,SASL_SSL://$KAFKA_HOST:$KAFKA_SASL_SSL_PORT,SSL://$KAFKA_HOST:$KAFKA_SSL_PORT,PLAINONLY://$KAFKA_HOST:$KAFKA_PLAIN_ONLY_PORT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,PLAINONLY:SASL_SSL
ssl.keystore.type=PEM
ssl.keystore.location=$SECURE_DIR/server-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$SECURE_DIR/ca.pem
listener.name.ssl.ssl.client.auth=required
ssl.principal.mapping.rules=RULE:^CN=([^,]*).*\$/\$1/,DEFAULT
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_plainuser="$plainpw";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";
listener.name.plainonly.sasl.enabled.mechanisms=PLAIN
listener.name.plainonly.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_plainuser="$plainpw";
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=$SECURE_SUPER_USERS
EOF
}

# secure_format_args: the SCRAM users, created when the storage is formatted.
secure_format_args() {
    SECURE_FORMAT_ARGS=(
        --add-scram "SCRAM-SHA-512=[name=admin,password=$(secure_password admin)]"
        --add-scram "SCRAM-SHA-512=[name=app,password=$(secure_password app)]"
        --add-scram "SCRAM-SHA-256=[name=scram256,password=$(secure_password scram256)]"
    )
}

secure_print() {
    printf 'KAFKA_SASL_SSL_BROKERS=%s:%s\n' "$KAFKA_HOST" "$KAFKA_SASL_SSL_PORT"
    printf 'KAFKA_SSL_BROKERS=%s:%s\n' "$KAFKA_HOST" "$KAFKA_SSL_PORT"
    printf 'KAFKA_PLAIN_ONLY_BROKERS=%s:%s\n' "$KAFKA_HOST" "$KAFKA_PLAIN_ONLY_PORT"
    printf 'KAFKA_SECURE_DIR=%s\n' "$SECURE_DIR"
}
