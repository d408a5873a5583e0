# The devcloud: a real Ironic API whose nodes are machines on this host (docs/devcloud.md).
DEVCLOUD_STATE := $(ROOT)/.devcloud
DEVCLOUD_VENV := $(DEVCLOUD_STATE)/venv
DEVCLOUD_NOVA_VENV := $(DEVCLOUD_STATE)/nova-venv
DEVCLOUD := python3 $(ROOT)/devcloud/devcloud.py
APT_PACKAGES += genisoimage debootstrap
# Images first (up only starts things: seconds); node-image (mk/nodeimage.mk) is added there.
CI_PREREQS += devcloud-install devcloud-images devcloud-up

.PHONY: devcloud-install devcloud-images devcloud-up devcloud-down devcloud-status devcloud-api-stop \
	devcloud-api-start devcloud-test

$(DEVCLOUD_VENV)/.installed: devcloud/requirements.txt devcloud/constraints.txt | devcloud-packages
	test -x $(DEVCLOUD_VENV)/bin/python || python3 -m venv $(DEVCLOUD_VENV)
	$(DEVCLOUD_VENV)/bin/pip install -q --upgrade pip
	$(DEVCLOUD_VENV)/bin/pip install -q -r devcloud/requirements.txt -c devcloud/constraints.txt
	$(DEVCLOUD_VENV)/bin/pip check
	touch $@

# Keystone, Placement, Nova, Glance (docs/devcloud-nova.md).
$(DEVCLOUD_NOVA_VENV)/.installed: devcloud/requirements-nova.txt devcloud/constraints-nova.txt | devcloud-packages
	test -x $(DEVCLOUD_NOVA_VENV)/bin/python || python3 -m venv $(DEVCLOUD_NOVA_VENV)
	$(DEVCLOUD_NOVA_VENV)/bin/pip install -q --upgrade pip
	$(DEVCLOUD_NOVA_VENV)/bin/pip install -q -r devcloud/requirements-nova.txt -c devcloud/constraints-nova.txt
	$(DEVCLOUD_NOVA_VENV)/bin/pip check
	touch $@

# The devcloud's Debian packages, in one apt transaction before any venv is built (so that the
# venvs, images and builds after it can run side by side, make -j, without two apt-gets). RabbitMQ
# (the Nova part) is started by devcloud-up on 127.0.0.1 only: the package's own service is never
# started (policy-rc.d in containers; /etc/rabbitmq/rabbitmq-env.conf binds it to loopback should
# it ever start).
DEVCLOUD_PACKAGES := postgresql openssh-server iproute2 genisoimage debootstrap iptables
ifneq ($(DEVCLOUD_NOVA),0)
# Neutron's database and its ML2/OVN data plane (devcloud/neutroncloud.py); none of their
# services is started by the packages (policy-rc.d), the devcloud runs its own on 127.0.0.1.
DEVCLOUD_PACKAGES += rabbitmq-server mariadb-server ovn-central ovn-host openvswitch-switch ethtool
endif
.PHONY: devcloud-packages
devcloud-packages: ## the devcloud's Debian packages (as root; otherwise says which are missing)
	@if [ "$$(id -u)" = 0 ] && [ ! -e /etc/rabbitmq/rabbitmq-env.conf ]; then \
	  mkdir -p /etc/rabbitmq; printf 'NODE_IP_ADDRESS=127.0.0.1\nERL_EPMD_ADDRESS=127.0.0.1\n' >/etc/rabbitmq/rabbitmq-env.conf; fi; \
	$(call apt_install,$(DEVCLOUD_PACKAGES),devcloud: missing system packages,exit 1)

DEVCLOUD_INSTALLED := $(DEVCLOUD_VENV)/.installed
ifneq ($(DEVCLOUD_NOVA),0)
DEVCLOUD_INSTALLED += $(DEVCLOUD_NOVA_VENV)/.installed
endif

devcloud-install: $(DEVCLOUD_INSTALLED) ## install the devcloud (Ironic venv .devcloud/venv, Nova venv .devcloud/nova-venv unless DEVCLOUD_NOVA=0, Debian packages)

devcloud-images: ## the devcloud's stock node image .devcloud/images/stock.tar (debootstrap; rebuilt only when its inputs change)
	@docker/build-node-image.sh --variant stock --out $(DEVCLOUD_STATE)/images/stock.tar

devcloud-up: devcloud-install ## start the devcloud: PostgreSQL, Ironic on :6385 (cleaning knobs DEVCLOUD_IRONIC_CLEAN, DEVCLOUD_IRONIC_CLEAN_DELAY), DEVCLOUD_NODES (3) nodes in dlbench-bm + DEVCLOUD_SECOND_POOL (2) in dlbench-bm-2, node agent; Keystone, Nova, Glance... (DEVCLOUD_NOVA=0: not), Magnum, installing it first (DEVCLOUD_MAGNUM=0: not)
	@$(DEVCLOUD) up

devcloud-down: ## stop the devcloud and remove its namespaces (DEVCLOUD_PURGE=1 also deletes its PostgreSQL data)
	@$(DEVCLOUD) down

devcloud-status: ## devcloud processes, images and nodes (provision state, machine, image, sshd, dockerd)
	@$(DEVCLOUD) status

devcloud-api-stop: ## fault knob: stop the Ironic process (API + conductor)
	@$(DEVCLOUD) fault api-stop

devcloud-api-start: ## fault knob: start the Ironic process again
	@$(DEVCLOUD) fault api-start

devcloud-test: venv devcloud-install ## devcloud infrastructure tests (bring it up themselves if needed)
	$(PY) -m pytest tests/devcloud_infra -q
